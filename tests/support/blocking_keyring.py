"""A keyring back-end that never answers (``PYTHON_KEYRING_BACKEND=support.blocking_keyring.Keyring``,
with ``tests`` on ``PYTHONPATH``): a Secret Service waiting on an unlock prompt nobody sees."""

import threading

from keyring.backend import KeyringBackend


class Keyring(KeyringBackend):
    priority = 10

    def get_password(self, service, username):
        threading.Event().wait()  # forever

    def set_password(self, service, username, password):
        threading.Event().wait()

    def delete_password(self, service, username):
        threading.Event().wait()
