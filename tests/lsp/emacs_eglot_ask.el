;;; emacs_eglot_ask.el --- driven by test_lsp_eglot.py  -*- lexical-binding: t -*-
;; Emacs's own eglot, set up with the README's snippet (loaded from EGLOT_SNIPPET), attaches
;; `agent-server lsp' to a Python file, `agent-server-ask' runs from a buffer eglot does not manage,
;; the user answers each permission question (eglot's `completing-read') with "Allow once", the
;; agent's edit lands in the buffer and the user saves it.
(require 'eglot)
(require 'json)
(defvar drv-questions nil)
(defvar drv-messages nil)
(defvar drv-errors nil)
(defvar drv-result nil)
(defun drv-wait (pred seconds)
  "Serve the server's messages until PRED holds or SECONDS pass; PRED's value."
  (let ((end (+ (float-time) seconds)) v)
    (while (and (not (setq v (funcall pred))) (< (float-time) end))
      (accept-process-output nil 0.05))
    v))
(defun drv-finish ()
  (with-temp-file (getenv "EMACS_RESULT")
    (insert (json-encode `((questions . ,(vconcat (reverse drv-questions)))
                           (messages . ,(vconcat (reverse drv-messages)))
                           (errors . ,(vconcat (reverse drv-errors)))
                           ,@drv-result))))
  (kill-emacs 0))
;; the user picks "Allow once" in eglot's prompt for window/showMessageRequest
(advice-add 'completing-read :around
            (lambda (orig prompt collection &rest args)
              (cond
               ((string-prefix-p "Ask the agent" prompt)
                ;; what TAB offers after "/", "/u", "/mo" (the README's `agent-server-ask')
                (push `(completions . ((slash . ,(vconcat (all-completions "/" collection)))
                                       (u . ,(vconcat (all-completions "/u" collection)))
                                       (mo . ,(vconcat (all-completions "/mo" collection)))))
                      drv-result)
                "/usage")
               ((not (string-match-p "\\[eglot\\] Server reports" prompt))
                (apply orig prompt collection args))
               (t
                (push `((prompt . ,(substring-no-properties prompt)) (items . ,(vconcat collection)))
                      drv-questions)
                "Allow once"))))
(advice-add 'message :after
            (lambda (fmt &rest args)
              (when (and fmt (string-prefix-p "agent-server" fmt))
                (push (apply #'format fmt args) drv-messages))))
(condition-case err
    (progn
      (load (getenv "EGLOT_SNIPPET") nil t)
      ;; no server yet: the snippet says so instead of failing
      (with-current-buffer (get-buffer-create "*scratch*") (agent-server-ask "too early"))
      (let ((file (find-file-noselect (getenv "EMACS_FILE"))))
        (with-current-buffer file
          (apply #'eglot (eglot--guess-contact))
          (push `(managed . ,(and (drv-wait (lambda () (eglot-managed-p)) 30) t)) drv-result))
        ;; from a buffer eglot does not manage, as a user in *scratch* would
        (with-current-buffer (get-buffer-create "*scratch*")
          (agent-server-ask (getenv "EMACS_PROMPT"))
          ;; the ask returns at once: Emacs stays usable while the turn runs
          (push `(questions_when_ask_returned . ,(length drv-questions)) drv-result))
        (push `(landed . ,(and (drv-wait (lambda () (with-current-buffer file
                                                     (string= (buffer-string) (getenv "EMACS_EXPECT"))))
                                        40)
                               t))
              drv-result)
        (push `(ended . ,(and (drv-wait (lambda () (seq-find (lambda (m) (string-match-p "turn ended" m))
                                                             drv-messages))
                                        20)
                              t))
              drv-result)
        (with-current-buffer file
          (push `(buffer . ,(buffer-string)) drv-result)
          (save-buffer))
        (push '(saved . t) drv-result)
        ;; M-x agent-server-ask: the prompt completes the slash commands; /usage runs as the command
        (with-current-buffer file
          (let ((ended (length (seq-filter (lambda (m) (string-match-p "turn ended" m)) drv-messages))))
            (call-interactively #'agent-server-ask)
            (push `(command_ended . ,(and (drv-wait (lambda () (> (length (seq-filter (lambda (m) (string-match-p "turn ended" m))
                                                                                       drv-messages))
                                                                   ended))
                                                    30)
                                          t))
                  drv-result)))
        ;; the user stops the server from the file's buffer (M-x eglot-shutdown); it exits cleanly
        (with-current-buffer file
          (let ((server (eglot-current-server)))
            (eglot-shutdown server)
            (push `(server_exited . ,(not (process-live-p (jsonrpc--process server)))) drv-result)))))
  (error (push (format "%S" err) drv-errors)))
(drv-finish)
