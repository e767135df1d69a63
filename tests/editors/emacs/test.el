;;; test.el --- Eglot against `memlint server', in batch -*- lexical-binding: t -*-
;; Opens a training script, waits for memlint's diagnostics in Flymake, runs the MEM004
;; quick fix through `eglot-code-actions' (answering its menu as a user would), checks the
;; buffer and saves it. Exits 0 on success and 1 on any failure (run.sh adds a timeout).

;; -Q skips Debian's site start-up, which puts its elpa-* packages (eglot and the newer
;; project/xref it needs) on the load path.
(dolist (dir (file-expand-wildcards "/usr/share/emacs/site-lisp/elpa/*"))
  (push dir load-path))
(require 'cl-lib)
(require 'eglot)
(require 'flymake)
(require 'python)

(defun memlint-test-log (fmt &rest args)
  (princ (concat "[emacs " emacs-version "] "
                 (apply #'format fmt args) "\n")
         #'external-debugging-output))

(defun memlint-test-fail (fmt &rest args)
  (princ (concat "FAIL: " (apply #'format fmt args) "\n") #'external-debugging-output)
  ;; The end of the LSP traffic says what the server and Eglot last told each other.
  (ignore-errors
    (let ((events (with-current-buffer (jsonrpc-events-buffer (eglot-current-server)) (buffer-string))))
      (princ (substring events (max 0 (- (length events) 6000))) #'external-debugging-output)))
  (kill-emacs 1))

(defun memlint-test-wait (what seconds pred)
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (accept-process-output nil 0.1))
    (unless (funcall pred)
      (memlint-test-fail "timed out after %ss waiting for %s" seconds what))))

(defun memlint-test-codes ()
  "The rule codes of the memlint diagnostics Flymake holds for this buffer, sorted."
  (sort (cl-loop for d in (flymake-diagnostics)
                 for lsp = (cdr (assoc 'eglot-lsp-diag (flymake-diagnostic-data d)))
                 when (equal (plist-get lsp :source) "memlint")
                 collect (plist-get lsp :code))
        #'string<))

(defun memlint-test-run-action (title)
  "Run the quick fix TITLE at point through the interactive code-action menu."
  (let ((before (buffer-string))
        (offered nil)
        ;; Not a mouse event: eglot then asks with `completing-read', answered here.
        (last-nonmenu-event 13))
    (cl-letf (((symbol-function 'completing-read)
               (lambda (_prompt collection &rest _)
                 (setq offered (mapcar #'car collection))
                 (if (assoc title collection) title
                   (memlint-test-fail "no action %S among %S" title offered)))))
      (eglot-code-actions (line-beginning-position) (line-end-position) "quickfix" t))
    (when (equal before (buffer-string))
      (memlint-test-fail "the action %S did not change the buffer" title))
    ;; Eglot sends didChange from an idle timer; batch Emacs is never idle.
    (eglot--signal-textDocument/didChange)))

(condition-case err
    (let ((bin (or (getenv "MEMLINT_BIN") (memlint-test-fail "MEMLINT_BIN is not set")))
          (file (or (getenv "MEMLINT_TEST_FILE") (memlint-test-fail "MEMLINT_TEST_FILE is not set")))
          (eglot-sync-connect t))
      (find-file file)
      (python-mode)
      (eglot '(python-mode) (cons 'transient (file-name-directory file)) 'eglot-lsp-server
             (list bin "server") "python")
      (memlint-test-wait "eglot to manage the buffer" 15 (lambda () (bound-and-true-p eglot--managed-mode)))
      ;; Flymake defers its first run to the command loop, which batch mode lacks.
      (flymake-start)
      (memlint-test-wait "MEM002 and MEM004" 20 (lambda () (equal (memlint-test-codes) '("MEM002" "MEM004"))))
      (memlint-test-log "diagnostics: %S" (memlint-test-codes))
      (goto-char (point-min))
      (search-forward "torch.cuda.empty_cache()")
      (memlint-test-run-action "Remove the `empty_cache()` call (MEM004)")
      (when (save-excursion (goto-char (point-min)) (search-forward "empty_cache" nil t))
        (memlint-test-fail "the quick fix left empty_cache():\n%s" (buffer-string)))
      (flymake-start)
      (memlint-test-wait "only MEM002 after the fix" 20 (lambda () (equal (memlint-test-codes) '("MEM002"))))
      (memlint-test-log "quick fix applied: %S" (memlint-test-codes))
      (goto-char (point-min))
      (search-forward "total += loss")
      (memlint-test-run-action "Disable MEM002 for this line")
      (unless (equal (buffer-substring (line-beginning-position) (line-end-position))
                     "        total += loss  # noqa: MEM002")
        (memlint-test-fail "unexpected line: %S" (buffer-substring (line-beginning-position) (line-end-position))))
      (flymake-start)
      (memlint-test-wait "no findings after the noqa" 20 (lambda () (null (memlint-test-codes))))
      (save-buffer)
      (memlint-test-log "ok")
      ;; shutdown + exit; Emacs 28's jsonrpc then deletes the process at once (the
      ;; "exited with status 9" line), which is the client's doing, not the server's.
      (eglot-shutdown (eglot-current-server))
      (kill-emacs 0))
  (error (memlint-test-fail "%S" err)))
(memlint-test-fail "fell off the end of the test")
