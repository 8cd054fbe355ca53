"""The OS sandbox of the shell tool: ``confiner`` (the probe and ``ShellConfiner``, as the server
sees it), ``shell_masks`` (what the confined shell must not see), ``shell_spawn`` (the launcher's
client), and the scripts run by path — ``sandbox_exec`` (the wrapper), ``sandbox_zygote`` (the
launcher) with their standard-library siblings ``sandbox_mounts`` and ``sandbox_seccomp``.

Imports nothing: the wrapper imports its siblings as ``agent_server.policy.sandbox.*`` or, run as a
script, by their ``sandbox_*`` names (never a bare ``seccomp``: that is libseccomp's binding).
"""
