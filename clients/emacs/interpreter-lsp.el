;;; interpreter-lsp.el --- interpreter-lsp through eglot  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: languages, tools
;; SPDX-License-Identifier: MIT

;;; Commentary:

;; The interpreter-lsp server lets a language model propose code that runs in
;; your workspace's persistent Jupyter kernel.  Eglot starts the server and
;; carries requests; this file adds what eglot does not know:
;;
;; - handlers for the server's `interpreter/*' notifications, which write the
;;   model's reply, its proposals, each run's code, output and state, and the
;;   turn's state into one buffer per project, `*interpreter-lsp: PROJECT*'
;;   (without them eglot only logs these notifications in its events buffer);
;;   code is written as it runs: a character that does not show, or that
;;   reorders the text around it, shows as `<U+202E>' (Trojan Source);
;; - commands that send the server's `interpreter.*' commands;
;; - a per-folder trust list (`interpreter-lsp-trust'): until you trust a
;;   folder the server is told it is not trusted, and nothing runs there;
;; - the conversation so far, written first when eglot connects.
;;
;;   (add-to-list 'load-path "/path/to/interpreter-lsp/clients/emacs")
;;   (require 'interpreter-lsp)
;;   (setq interpreter-lsp-settings '(:model "ollama_chat/qwen2.5-coder"))
;;   (interpreter-lsp-setup)      ; Python buffers use the server through eglot
;;   (global-set-key (kbd "C-c i") 'interpreter-lsp-command-map)
;;
;; Then M-x eglot in a Python file.  Keys after the prefix (and, without it,
;; in the output buffer):
;;   c  chat: ask the model (an active region is what the question is about)
;;   x  run the region, else the `# %%' cell at point, else the whole file
;;   a  approve the newest proposal    r  reject it (C-u: say why)
;;   i  interrupt runs, queued runs and the model's reply; ends the turn
;;   k  restart the kernel    n  new conversation    o  show the output buffer
;;   u  undo the last request (or your last run): its files and variables
;;      come back as they were    U  redo: bring back what the undo took
;;   t  trust this folder: until then nothing runs in it (remembered in
;;      `interpreter-lsp-trust-file'; M-x interpreter-lsp-untrust withdraws it)
;;   e  export the conversation as a notebook (C-u: and verify it reproduces)
;;
;; Not available: `input()' and `getpass()' in your code fail at once (one line
;; says so), because eglot cannot answer the server's
;; `interpreter/input' request (so this file does not declare that
;; capability).  Applying a proposal to the buffer and the variables view are
;; in the VS Code and Neovim clients only.  Eglot runs one
;; server per major mode and project: in these buffers interpreter-lsp takes
;; the place of pylsp or pyright.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'eglot)
(require 'jsonrpc)

(defgroup interpreter-lsp nil
  "Use the interpreter-lsp language server through eglot."
  :group 'eglot
  :prefix "interpreter-lsp-")

(defcustom interpreter-lsp-program '("interpreter-lsp")
  "The server command and its arguments.
E.g. (\"~/.local/bin/interpreter-lsp\" \"--log-file\" \"/tmp/ilsp.log\")."
  :type '(repeat string))

(defcustom interpreter-lsp-settings nil
  "The server's `interpreter' settings, a plist.
E.g. (:model \"gpt-4o-mini\" :autoRun :json-false); the keys are in the
server's docs/configuration.md.  Sent in initializationOptions and as the
answer to the server's workspace/configuration request.  Only the global
value counts: a directory-local one (from a repository you do not know)
never chooses the model, the endpoint or what runs."
  :type 'plist)

(defcustom interpreter-lsp-modes '(python-mode python-ts-mode)
  "Major modes whose buffers `interpreter-lsp-setup' gives to the server."
  :type '(repeat symbol))

(defcustom interpreter-lsp-display-output t
  "Non-nil: show the output buffer when a chat or one of your runs starts."
  :type 'boolean)

(defclass interpreter-lsp-server (eglot-lsp-server)
  ((proposals :initform nil :accessor interpreter-lsp--proposals
              :documentation "Proposals waiting for approval, newest first.")
   (last-key :initform nil :accessor interpreter-lsp--last-key
             :documentation "The turn or run that wrote last in the buffer.")
   (output :initform nil :accessor interpreter-lsp--output
           :documentation "The output buffer.")
   (turn-states :initform (make-hash-table :test #'equal)
                :accessor interpreter-lsp--turn-states
                :documentation "The state last written for each turn.")
   (held :initform (make-hash-table :test #'equal)
         :accessor interpreter-lsp--held
         :documentation "For each turn whose reply streams: (HELD . BEFORE), the
end of the text not shown yet and the last two characters shown."))
  "An eglot connection to interpreter-lsp.")

;;;; Trust

(defcustom interpreter-lsp-trust-file
  (locate-user-emacs-file "interpreter-lsp-trusted.eld")
  "Where the folders you trust are kept (a list of directory names).
Outside every repository, so a repository cannot trust itself."
  :type 'file)

(defun interpreter-lsp--trusted-folders ()
  "The folders the user trusts, from `interpreter-lsp-trust-file'."
  (when (file-readable-p interpreter-lsp-trust-file)
    (with-temp-buffer
      (insert-file-contents interpreter-lsp-trust-file)
      (let ((data (ignore-errors (read (current-buffer)))))
        (and (listp data) (cl-remove-if-not #'stringp data))))))

(defun interpreter-lsp--save-trusted (folders)
  (let ((dir (file-name-directory interpreter-lsp-trust-file)))
    (when dir (make-directory dir t)))
  (with-temp-file interpreter-lsp-trust-file
    (let ((print-length nil) (print-level nil))
      (prin1 folders (current-buffer)))))

(defun interpreter-lsp--folder (dir)
  (file-name-as-directory (expand-file-name dir)))

(defun interpreter-lsp-trusted-p (root)
  "Non-nil when ROOT, or a folder holding it, is trusted.
A folder is untrusted until you trust it (`interpreter-lsp-trust'):
opening a repository must not run its code (its .venv's python is its
own code, its .interpreter-lsp.toml may name an interpreter)."
  (let ((root (interpreter-lsp--folder root)))
    (cl-some (lambda (f) (string-prefix-p (interpreter-lsp--folder f) root))
             (interpreter-lsp--trusted-folders))))

(defun interpreter-lsp--server-root (server)
  (project-root (eglot--project server)))

;;;; Setup

(defun interpreter-lsp--init-options (server)
  "The initializationOptions: the settings, whether the folder is
trusted, and no `input' capability."
  (let ((settings (default-value 'interpreter-lsp-settings))
        (trusted (if (interpreter-lsp-trusted-p (interpreter-lsp--server-root server))
                     t :json-false)))
    (if settings
        (list :settings settings :trusted trusted)
      (list :trusted trusted))))

(defun interpreter-lsp--contact (&optional _interactive)
  "The contact for `eglot-server-programs': class, command, options."
  (cons 'interpreter-lsp-server
        (append interpreter-lsp-program
                (list :initializationOptions #'interpreter-lsp--init-options))))

;;;###autoload
(defun interpreter-lsp-setup ()
  "Make eglot use interpreter-lsp in `interpreter-lsp-modes'."
  (add-to-list 'eglot-server-programs
               (cons interpreter-lsp-modes #'interpreter-lsp--contact)))

(cl-defmethod eglot-handle-request
  ((_server interpreter-lsp-server) (_method (eql workspace/configuration))
   &key items)
  "Answer the `interpreter' section from the global settings only.
Eglot's own answer reads `eglot-workspace-configuration', which a
repository's .dir-locals.el may set without asking."
  (apply #'vector
         (mapcar (lambda (item)
                   (and (equal (plist-get item :section) "interpreter")
                        (default-value 'interpreter-lsp-settings)))
                 items)))

;;;; The protocol's names

(defconst interpreter-lsp-protocol-names
  '(;; Commands: workspace/executeCommand with one JSON object.
    "interpreter.chat" "interpreter.run" "interpreter.approve"
    "interpreter.reject" "interpreter.applyProposal" "interpreter.interrupt"
    "interpreter.restartKernel" "interpreter.reset" "interpreter.undo"
    "interpreter.redo" "interpreter.history" "interpreter.variables"
    "interpreter.status" "interpreter.exportNotebook" "interpreter.setTrusted"
    "interpreter.compact"
    ;; Notifications and requests: server -> client.
    "interpreter/message" "interpreter/proposal" "interpreter/output"
    "interpreter/runStatus" "interpreter/turnStatus" "interpreter/kernelStatus"
    "interpreter/proposalStatus" "interpreter/input")
  "Every name of server/interpreter_lsp/protocol.py, spelled as it spells them.
tests/test_mirrors.py checks this list, and every name this file uses,
against the server's.")

;;;; The output buffer

(defvar-local interpreter-lsp--buffer-server nil
  "In an output buffer: the server it belongs to.")

(defvar interpreter-lsp-command-map
  (let ((map (make-sparse-keymap)))
    (define-key map "c" #'interpreter-lsp-chat)
    (define-key map "x" #'interpreter-lsp-run)
    (define-key map "a" #'interpreter-lsp-approve)
    (define-key map "r" #'interpreter-lsp-reject)
    (define-key map "i" #'interpreter-lsp-interrupt)
    (define-key map "k" #'interpreter-lsp-restart-kernel)
    (define-key map "n" #'interpreter-lsp-reset)
    (define-key map "u" #'interpreter-lsp-undo)
    (define-key map "U" #'interpreter-lsp-redo)
    (define-key map "o" #'interpreter-lsp-show-output)
    (define-key map "t" #'interpreter-lsp-trust)
    (define-key map "e" #'interpreter-lsp-export-notebook)
    map)
  "The interpreter-lsp commands; bind it to a prefix, e.g. C-c i.")
(fset 'interpreter-lsp-command-map interpreter-lsp-command-map)

(define-derived-mode interpreter-lsp-output-mode special-mode "interpreter-lsp"
  "The conversation, proposals and runs of one interpreter-lsp server.
\\{interpreter-lsp-output-mode-map}"
  ;; Code reads left to right, as in `prog-mode': a line that starts with a
  ;; right-to-left letter must not turn its whole line around.  (The
  ;; characters that force a direction never reach the buffer: see
  ;; `interpreter-lsp--show-hidden'.)
  (setq bidi-paragraph-direction 'left-to-right))
(set-keymap-parent interpreter-lsp-output-mode-map
                   (make-composed-keymap interpreter-lsp-command-map
                                         special-mode-map))

(defun interpreter-lsp-output-buffer (&optional server)
  "The output buffer of SERVER (default: the current one)."
  (let* ((server (or server (interpreter-lsp--server)))
         (buffer (interpreter-lsp--output server)))
    (unless (buffer-live-p buffer)
      ;; Two projects with the same directory name get *...* and *...*<2>.
      (setq buffer (generate-new-buffer
                    (format "*interpreter-lsp: %s*" (eglot-project-nickname server))))
      (with-current-buffer buffer
        (interpreter-lsp-output-mode)
        (setq interpreter-lsp--buffer-server server))
      (setf (interpreter-lsp--output server) buffer
            (interpreter-lsp--last-key server) nil))
    buffer))

(defun interpreter-lsp--display (server)
  (when (and interpreter-lsp-display-output (not noninteractive))
    (display-buffer (interpreter-lsp-output-buffer server)
                    '(nil (inhibit-same-window . t)))))

(defun interpreter-lsp--insert (server key text &optional face)
  "Append TEXT (with FACE) to SERVER's output buffer for KEY.
KEY names a turn or a run (\"turn t-...\", \"run r-...\").  When another
one wrote last, a line [KEY] comes first, unless TEXT starts with KEY.
Windows that showed the end of the buffer keep showing it."
  (with-current-buffer (interpreter-lsp-output-buffer server)
    (let* ((inhibit-read-only t)
           (end (point-max))
           (followers (cl-remove-if-not (lambda (w) (= (window-point w) end))
                                        (get-buffer-window-list nil nil t)))
           (at-end (= (point) end)))
      (save-excursion
        (goto-char end)
        (when (and key (not (equal key (interpreter-lsp--last-key server))))
          (unless (bolp) (insert "\n"))
          (unless (string-prefix-p key text)
            (insert (propertize (format "[%s]\n" key) 'face 'shadow))))
        (setf (interpreter-lsp--last-key server) key)
        (insert (if face (interpreter-lsp--with-face text face) text)))
      (when at-end (goto-char (point-max)))
      (dolist (w followers) (set-window-point w (point-max))))))

(defun interpreter-lsp--with-face (text face)
  "TEXT with FACE under the faces it has: a hidden character's marker keeps
its own face (`interpreter-lsp-hidden-char') in a line drawn in FACE."
  (let ((text (copy-sequence text)))
    (add-face-text-property 0 (length text) face t text)
    text))

(defun interpreter-lsp--line (server key text &optional face)
  "Insert TEXT (with FACE) for KEY as a line of its own.
An empty TEXT only ends the line being written."
  (with-current-buffer (interpreter-lsp-output-buffer server)
    (unless (memq (char-before (point-max)) '(nil ?\n))
      (let ((inhibit-read-only t))
        (save-excursion (goto-char (point-max)) (insert "\n")))))
  (unless (string-empty-p text)
    (interpreter-lsp--insert server key (concat text "\n") face)))

(defun interpreter-lsp--indent (code)
  "CODE as the buffer shows it: indented, each hidden character a marker.
The markers come first, so a trailing lone carriage return (a line end to
Python) shows as one, not trimmed away."
  (replace-regexp-in-string "^" "    " (string-trim-right (interpreter-lsp--show-hidden code))))

;;;; What a person reads is what runs

;; Code can hold characters that do not show, or that reorder the text
;; around them ("Trojan Source", CVE-2021-42574): Emacs applies the bidi
;; algorithm to every line (`bidi-display-reordering'), so a right-to-left
;; override in a string makes the rest of its line read backwards, and a
;; call can look like part of a comment; a zero-width space, or a Hangul
;; filler (U+3164, which Python accepts in a name), shows as nothing; a lone
;; carriage return ends a Python line that the buffer shows as one.  The
;; server rates such code at least medium and names the characters
;; (server/interpreter_lsp/safety/visible.py); this buffer shows each one as
;; the text `<U+202E>' instead of itself.  Replacing the text is the safe
;; choice: a `display' property would leave the character in the buffer,
;; where it still takes part in bidi resolution.  Nothing here is sent
;; back: approving sends the proposal's id, and the server runs the code it
;; holds, byte for byte.

(defface interpreter-lsp-hidden-char
  '((t :inherit font-lock-warning-face))
  "A character of code that does not show, or that reorders the text
around it, drawn as `<U+202E>' in the output buffer.")

(defconst interpreter-lsp--default-ignorable
  '((#x00AD . #x00AD) (#x034F . #x034F) (#x061C . #x061C) (#x115F . #x1160)
    (#x17B4 . #x17B5) (#x180B . #x180F) (#x200B . #x200F) (#x202A . #x202E)
    (#x2060 . #x206F) (#x3164 . #x3164) (#xFE00 . #xFE0F) (#xFEFF . #xFEFF)
    (#xFFA0 . #xFFA0) (#xFFF0 . #xFFF8) (#x1BCA0 . #x1BCA3) (#x1D173 . #x1D17A)
    (#xE0000 . #xE0FFF))
  "Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt),
as the server lists them: what renders as nothing when a font has no glyph
for it.  Emacs has no table of this property; most of these are Cf or Cn
anyway, these also catch the letters that show blank (U+3164, U+115F).")

(defun interpreter-lsp--hidden-char-p (char)
  "Non-nil when CHAR is hidden by itself (the server's `_hidden_char').
Its general category is Cc, Cf, Co, Cn (unassigned), Cs, Zl or Zp, or it is
a Default_Ignorable_Code_Point; the variation selectors are not (an emoji
such as U+26A0 U+FE0F ends with one): they neither hide nor reorder text.
Tab, line feed and the two characters that depend on their neighbours
\(carriage return, zero-width joiner) are the caller's."
  (and (not (interpreter-lsp--variation-selector-p char))
       (or (memq (get-char-code-property char 'general-category) '(Cc Cf Co Cn Cs Zl Zp))
           (cl-some (lambda (range) (<= (car range) char (cdr range)))
                    interpreter-lsp--default-ignorable))))

(defun interpreter-lsp--symbol-p (char)
  (memq (get-char-code-property char 'general-category) '(So Sk)))

(defun interpreter-lsp--variation-selector-p (char)
  (or (<= #xFE00 char #xFE0F) (<= #xE0100 char #xE01EF)))

(defun interpreter-lsp--marker (char)
  "How CHAR is shown instead of itself: `<U+202E>', as the server names it.
Its help-echo says which character it is and what it would have done."
  (let ((name (get-char-code-property char 'name))
        (what (cond ((eq char ?\r) "a carriage return: Python ends the line here")
                    ((or (memq char '(#x061C #x200E #x200F))
                         (<= #x202A char #x202E) (<= #x2066 char #x2069))
                     "it changes the direction of the text around it")
                    (t "it does not show"))))
    ;; A raw byte (Emacs keeps one that is not UTF-8 as a character past
    ;; U+10FFFF) is named as the byte it is.
    (propertize (if (> char #x10FFFF) (format "<byte %02X>" (logand char #xFF)) (format "<U+%04X>" char))
                'face 'interpreter-lsp-hidden-char
                'help-echo (format "U+%04X%s: %s" char
                                   (if (and (stringp name) (not (string-prefix-p "<" name)))
                                       (concat " " name) "")
                                   what))))

(defun interpreter-lsp--show-hidden (text &optional before)
  "TEXT as the buffer may show it: each hidden character as its marker.
The server's set (safety/visible.py, `hidden'), character for character:
see `interpreter-lsp--hidden-char-p'; a carriage return is hidden unless a
line feed follows it (then it is a Windows line end, and left out here, as
the line end it is); a zero-width joiner is hidden unless the characters
directly before and after it are both symbols (So, Sk), as inside the emoji
sequence U+1F469 U+200D U+1F4BB (a woman, a laptop); the symbol before it
may carry its variation selector (U+2764 U+FE0F U+200D U+1F525).  BEFORE is
the text shown just before TEXT, if TEXT is a piece of a longer one (its
last two characters are what the joiner looks back at)."
  (if (not (string-match-p "[^\t\n -~]" text))
      text                              ; printable ASCII: most code
    (let* ((from (length before))
           (all (concat before text))
           (last (1- (length all)))
           (pieces nil)
           (start from))
      (cl-loop
       for i from from to last
       for char = (aref all i)
       for drop = (and (eq char ?\r) (< i last) (eq (aref all (1+ i)) ?\n))
       for hide = (and (not drop)
                       (cond ((memq char '(?\t ?\n)) nil)
                             ((<= 32 char 126) nil)
                             ((eq char ?\r) t)
                             ((eq char #x200D)
                              (let ((b (1- i)))
                                (when (and (> b 0) (interpreter-lsp--variation-selector-p (aref all b)))
                                  (setq b (1- b)))
                                (not (and (>= b 0) (< i last)
                                          (interpreter-lsp--symbol-p (aref all b))
                                          (interpreter-lsp--symbol-p (aref all (1+ i)))))))
                             (t (interpreter-lsp--hidden-char-p char))))
       when (or drop hide)
       do (push (substring all start i) pieces)
       (when hide (push (interpreter-lsp--marker char) pieces))
       (setq start (1+ i)))
      (push (substring all start) pieces)
      (apply #'concat (nreverse pieces)))))

(defun interpreter-lsp--key (command)
  (let ((keys (where-is-internal command nil t)))
    (if keys (key-description keys) (format "M-x %s" command))))

(defun interpreter-lsp--forget (server key value)
  "Drop the waiting proposals whose KEY is VALUE."
  (setf (interpreter-lsp--proposals server)
        (cl-remove value (interpreter-lsp--proposals server)
                   :key (lambda (p) (plist-get p key)) :test #'equal))
  (interpreter-lsp--agents-changed server))

;;;; Other agents waiting, in every mode line

(defvar interpreter-lsp--agents-by-server (make-hash-table :test #'eq :weakness 'key)
  "For each server: the names of the other agents (over MCP) whose proposals wait.")

(defconst interpreter-lsp--agents-mode-line '(:eval (interpreter-lsp--agents-text))
  "The part of `global-mode-string' that says an agent waits for a decision.")

(defun interpreter-lsp--agents-text ()
  "\" [Claude Code 2.1 waiting]\" (or \" [2 agents waiting]\"), or \"\"."
  (let (names)
    (maphash (lambda (_server agents) (setq names (append names agents)))
             interpreter-lsp--agents-by-server)
    (setq names (delete-dups names))
    (if (null names) ""
      (propertize (format " [%s waiting]" (if (cdr names) (format "%d agents" (length names))
                                            (interpreter-lsp--show-hidden (car names))))
                  'face 'warning
                  'help-echo "Another agent's code waits for your decision: M-x interpreter-lsp-approve or -reject"))))

(defun interpreter-lsp--agents-changed (server)
  "Say in every mode line whether another agent's proposal waits in SERVER."
  (let ((agents (delete-dups
                 (delq nil (mapcar (lambda (p) (let ((agent (plist-get p :agent))) (and (stringp agent) agent)))
                                   (interpreter-lsp--proposals server))))))
    (if agents
        (puthash server agents interpreter-lsp--agents-by-server)
      (remhash server interpreter-lsp--agents-by-server))
    (when (and agents (not (member interpreter-lsp--agents-mode-line global-mode-string)))
      (setq global-mode-string
            (append (if (listp global-mode-string) global-mode-string (list global-mode-string))
                    (list interpreter-lsp--agents-mode-line))))
    (force-mode-line-update t)))

;;;; Notifications

(defun interpreter-lsp--origin (origin &optional agent)
  "Who started a run, in words: \"by you\", \"by the model\", \"by an agent\"."
  (pcase origin
    ("model" "by the model")
    ("agent" (if (and (stringp agent) (not (string-empty-p agent)))
                 (format "by an agent (%s)" (interpreter-lsp--show-hidden agent))
               "by an agent"))
    (_ "by you")))

(cl-defmethod eglot-handle-notification
  ((server interpreter-lsp-server) (_method (eql interpreter/message))
   &key turnId delta done &allow-other-keys)
  "The model's reply, streamed.
It holds the code it proposes, read as code: its hidden characters show as
markers too (`interpreter-lsp--show-hidden').  A carriage return or a
zero-width joiner that ends a piece waits for the next one, which decides
whether it is hidden."
  (let* ((key (concat "turn " turnId))
         (held (interpreter-lsp--held server))
         (state (gethash turnId held))
         (text (concat (car state) (or delta "")))
         (keep (if (and (not (eq done t)) (string-match-p "[\r\u200d]\\'" text)) 1 0))
         (shown (substring text 0 (- (length text) keep))))
    (if (eq done t)
        (remhash turnId held)
      (puthash turnId (cons (substring text (length shown))
                            (let ((seen (concat (cdr state) shown)))
                              (substring seen (max 0 (- (length seen) 2)))))
               held))
    (unless (string-empty-p shown)
      (interpreter-lsp--insert server key (interpreter-lsp--show-hidden shown (cdr state))))
    (when (eq done t) (interpreter-lsp--line server key ""))))

(cl-defmethod eglot-handle-notification
  ((server interpreter-lsp-server) (_method (eql interpreter/proposal))
   &rest proposal &key proposalId turnId language code risk autoRun waitReason
   agent created &allow-other-keys)
  "A code block of the model's reply: it waits for approval or runs itself."
  (let ((key (concat "turn " turnId))
        (reasons (mapconcat #'identity (plist-get risk :reasons) "; ")))
    ;; The agent's name is its own word for itself (over MCP): shown as its code is.
    (interpreter-lsp--line
     server key (interpreter-lsp--show-hidden
                 (format "proposal %s%s (%s, risk %s%s):" proposalId
                         (if (stringp agent)
                             (format " from %s%s" agent (if (stringp created) (concat " at " created) ""))
                           "")
                         language
                         (plist-get risk :level)
                         (if (string-empty-p reasons) "" (concat ": " reasons))))
     'bold)
    (interpreter-lsp--line server key (interpreter-lsp--indent code)
                           'font-lock-string-face)
    (if (eq autoRun t)
        (interpreter-lsp--line server key "(runs by itself: auto-run)" 'shadow)
      (push proposal (interpreter-lsp--proposals server))
      (interpreter-lsp--agents-changed server)
      (interpreter-lsp--line
       server key (format "(%s: %s approves, %s rejects)"
                          (or waitReason "waits for approval")
                          (interpreter-lsp--key 'interpreter-lsp-approve)
                          (interpreter-lsp--key 'interpreter-lsp-reject))
       'warning))))

(cl-defmethod eglot-handle-notification
  ((server interpreter-lsp-server) (_method (eql interpreter/proposalStatus))
   &key proposalId &allow-other-keys)
  "A proposal was decided (here or in another editor), written into a file, or
expired (its agent withdrew it): it no longer waits."
  (interpreter-lsp--forget server :proposalId proposalId))

(cl-defmethod eglot-handle-notification
  ((server interpreter-lsp-server) (_method (eql interpreter/output))
   &key runId kind text data ename &allow-other-keys)
  "A piece of a run's output."
  (let ((key (concat "run " runId))
        (png (plist-get data :image/png)))
    (cond
     ((and png (display-images-p) (image-type-available-p 'png))
      (interpreter-lsp--line server key "")
      (interpreter-lsp--insert server key "")  ; the [run ...] line, if another wrote last
      (with-current-buffer (interpreter-lsp-output-buffer server)
        (let ((inhibit-read-only t))
          (save-excursion
            (goto-char (point-max))
            (insert-image (create-image (base64-decode-string png) 'png t))
            (insert "\n")))))
     ((equal kind "error")
      ;; For input() the server says in one line that this editor cannot answer it.
      (interpreter-lsp--line server key (or text ename "") 'error))
     ((equal kind "stderr") (interpreter-lsp--insert server key (or text "") 'error))
     ((equal kind "stdout") (interpreter-lsp--insert server key (or text "")))
     (t (interpreter-lsp--line server key (string-trim-right (or text "")))))))

(cl-defmethod eglot-handle-notification
  ((server interpreter-lsp-server) (_method (eql interpreter/runStatus))
   &key runId state durationMs language message proposalId code origin agent files
   &allow-other-keys)
  "A run's state: queued (with its code), running, then its final state."
  (let ((key (concat "run " runId)))
    (unless (member state '("queued" "running"))
      (interpreter-lsp--mode-line server (concat "run " state)))
    (when proposalId (interpreter-lsp--forget server :proposalId proposalId))
    (pcase state
      ("queued"
       (when (equal origin "user") (interpreter-lsp--display server))
       (interpreter-lsp--line server key (format "%s (%s, %s):" key language
                                                 (interpreter-lsp--origin origin agent))
                              'bold)
       (when (and code (equal origin "user"))
         (interpreter-lsp--line server key (interpreter-lsp--indent code)
                                'font-lock-string-face)))
      ("running" nil)
      (_
       (interpreter-lsp--line
        server key
        (concat key " " state
                (if durationMs (format " (%d ms)" durationMs) "")
                (if message (concat ": " message) "")
                (if (> (length files) 0)
                    (concat "; files: "
                            (mapconcat
                             (lambda (f)
                               (concat (pcase (plist-get f :change)
                                         ("created" "+") ("deleted" "-") (_ "~"))
                                       (plist-get f :path)))
                             files " "))
                  ""))
        (if (equal state "ok") 'success 'error))))))

(defun interpreter-lsp--context-text (context)
  "Context use as \"12345 tok · $0.04\" (or \"cost unknown\"), or nil."
  (let ((tokens (plist-get context :tokens))
        (cost (plist-get context :cost)))
    (when (numberp tokens)
      (concat (format "%d tok" tokens)
              (cond ((eq (plist-get context :costKnown) :json-false) " · cost unknown")
                    ((and (numberp cost) (> cost 0)) (format " · $%.2f" cost))
                    (t ""))))))

(defun interpreter-lsp--mode-line (server state)
  "Show STATE (of the latest turn or run) in SERVER's output buffer's mode line."
  (with-current-buffer (interpreter-lsp-output-buffer server)
    (setq mode-line-process (concat " " state))
    (force-mode-line-update)))

(cl-defmethod eglot-handle-notification
  ((server interpreter-lsp-server) (_method (eql interpreter/turnStatus))
   &key turnId state message context &allow-other-keys)
  "The turn's state: thinking, awaiting-approval, running, done, ...
Each state is written once per step (the server may repeat `thinking'
once the request is ready); a final state says the context use and cost."
  (let* ((key (concat "turn " turnId))
         (states (interpreter-lsp--turn-states server))
         (final (member state '("done" "cancelled" "error")))
         (repeat (and (equal (gethash turnId states) state) (not message))))
    (puthash turnId state states)
    (when final
      (interpreter-lsp--forget server :turnId turnId)
      (let ((held (gethash turnId (interpreter-lsp--held server))))
        (remhash turnId (interpreter-lsp--held server))
        (when (and held (not (string-empty-p (car held))))
          (interpreter-lsp--insert server key (interpreter-lsp--show-hidden (car held) (cdr held))))))
    (unless (or (equal state "running") repeat)
      (let ((ctx (and final (interpreter-lsp--context-text context))))
        (interpreter-lsp--line server key
                               (concat key " " state (if message (concat ": " message) "")
                                       (if ctx (concat " (" ctx ")") ""))
                               (if (member state '("error" "cancelled")) 'error 'shadow))))
    (interpreter-lsp--mode-line server state)))

(cl-defmethod eglot-handle-notification
  ((server interpreter-lsp-server) (_method (eql interpreter/kernelStatus))
   &key language state message &allow-other-keys)
  "Kernel life-cycle: a kernel that died or restarts is worth a line.
So is news a live kernel's state does not show: a gateway connection lost
mid-run (the run looks as if it goes on while reconnecting), then restored."
  (cond
   ((member state '("dead" "restarting"))
    (interpreter-lsp--line
     server nil (format "(the %s kernel is %s%s)" language state
                        (if message (concat ": " message) ""))
     'warning))
   ((and message (member state '("busy" "idle")))
    (interpreter-lsp--line
     server nil (format "(the %s kernel: %s)" language message)
     (unless (string-prefix-p "reconnected" message) 'warning)))))

;;;; The conversation so far

(defun interpreter-lsp--error-text (ename evalue traceback)
  "The text of a kernel's error as the server words it (output.py, error_text).
The TRACEBACK lines without colour codes; without them, \"ENAME: EVALUE\"; a
failed shell command (no name, its exit status as EVALUE) reads \"exit status N\"."
  (let ((lines (replace-regexp-in-string
                "\e\\[[0-9;]*m" "" (mapconcat #'identity (or traceback []) "\n")))
        (ename (or ename ""))
        (evalue (or evalue "")))
    (cond ((not (string-empty-p lines)) lines)
          ((not (string-empty-p ename))
           (if (string-empty-p evalue) ename (concat ename ": " evalue)))
          ((string-match-p "\\`[0-9]+\\'" evalue) (concat "exit status " evalue))
          ((not (string-empty-p evalue)) evalue)
          (t "Error"))))

(defun interpreter-lsp--output-text (outputs)
  "The text of nbformat OUTPUTS (a vector of plists), as the buffer shows it live."
  (mapconcat
   (lambda (o)
     (let ((text (lambda (v) (if (vectorp v) (mapconcat #'identity v "") (or v "")))))
       (pcase (plist-get o :output_type)
         ("stream" (funcall text (plist-get o :text)))
         ((or "execute_result" "display_data")
          (let ((data (plist-get o :data)))
            (cond ((plist-get data :text/plain)
                   (concat (string-trim-right (funcall text (plist-get data :text/plain))) "\n"))
                  ((plist-get data :image/png) "[image]\n")
                  (t ""))))
         ("error"
          (concat (interpreter-lsp--error-text (plist-get o :ename) (plist-get o :evalue)
                                               (plist-get o :traceback))
                  "\n"))
         (_ ""))))
   outputs ""))

(defun interpreter-lsp--replay (server events)
  "Write the earlier EVENTS (interpreter.history) into SERVER's buffer."
  (when (> (length events) 0)
    (interpreter-lsp--line server nil "── earlier in this workspace ──" 'shadow)
    (seq-doseq (e events)
      (let ((turn (concat "turn " (or (plist-get e :turnId) ""))))
        (pcase (plist-get e :type)
          ("user" (interpreter-lsp--line server nil (concat ">>> " (plist-get e :text)) 'bold))
          ("assistant"
           (let ((text (plist-get e :text)))
             (when (and text (not (string-empty-p text)))
               (interpreter-lsp--line server turn (string-trim-right (interpreter-lsp--show-hidden text))))))
          ("proposal"
           (interpreter-lsp--line
            server turn (format "proposal %s (%s, risk %s):" (plist-get e :proposalId)
                                (plist-get e :language)
                                (plist-get (plist-get e :risk) :level))
            'bold)
           (interpreter-lsp--line server turn (interpreter-lsp--indent (plist-get e :code))
                                  'font-lock-string-face))
          ("run"
           (let ((key (concat "run " (plist-get e :runId)))
                 (duration (plist-get e :durationMs))
                 (state (or (plist-get e :state) "ok")))
             (interpreter-lsp--line server key
                                    (format "%s (%s, %s):" key (plist-get e :language)
                                            (interpreter-lsp--origin (plist-get e :origin)
                                                                     (plist-get e :agent)))
                                    'bold)
             (interpreter-lsp--line server key (interpreter-lsp--indent (or (plist-get e :code) ""))
                                    'font-lock-string-face)
             (interpreter-lsp--insert server key (interpreter-lsp--output-text (plist-get e :outputs)))
             (interpreter-lsp--line server key
                                    (concat key " " state
                                            (if (numberp duration) (format " (%d ms)" duration) ""))
                                    (if (equal state "ok") 'success 'error))))
          ("turnEnd"
           (interpreter-lsp--line server turn
                                  (concat turn " " (plist-get e :state)
                                          (let ((m (plist-get e :message))) (if m (concat ": " m) "")))
                                  'shadow))
          ("note" (interpreter-lsp--line server nil (plist-get e :text) 'shadow))
          ("error" (interpreter-lsp--line server turn (concat turn " error: " (plist-get e :message)) 'error))
          ("kernel"
           (interpreter-lsp--line server nil (format "(the %s kernel %s)" (plist-get e :language)
                                                     (plist-get e :state))
                                  'warning))
          ("compaction"
           (interpreter-lsp--line
            server nil (if (numberp (plist-get e :summaryTokens))
                           (format "⋯ Earlier turns condensed (%d tokens)" (plist-get e :summaryTokens))
                         "⋯ Earlier turns condensed")
            'shadow)))))
    (interpreter-lsp--line server nil "── now ──" 'shadow)))

(defun interpreter-lsp--on-connect (server)
  "On a new SERVER connection, show the conversation so far.
The other clients show it too: reopening Emacs loses nothing."
  (when (cl-typep server 'interpreter-lsp-server)
    (unless (interpreter-lsp-trusted-p (interpreter-lsp--server-root server))
      (interpreter-lsp--line
       server nil
       (format "This folder is not trusted, so nothing runs in it (not even its .venv): %s trusts %s"
               (interpreter-lsp--key 'interpreter-lsp-trust)
               (interpreter-lsp--folder (interpreter-lsp--server-root server)))
       'warning))
    (jsonrpc-async-request
     server :workspace/executeCommand
     (list :command "interpreter.history" :arguments (vector (make-hash-table)))
     :success-fn (lambda (result)
                   (ignore-errors (interpreter-lsp--replay server (plist-get result :messages))))
     :error-fn #'ignore
     :timeout-fn #'ignore)))

(add-hook 'eglot-connect-hook #'interpreter-lsp--on-connect)

;;;; Commands

(defun interpreter-lsp--server ()
  "The server of the current buffer or project, else the only one running."
  (or (and interpreter-lsp--buffer-server
           (jsonrpc-running-p interpreter-lsp--buffer-server)
           interpreter-lsp--buffer-server)
      (let ((current (eglot-current-server)))
        (and (cl-typep current 'interpreter-lsp-server) current))
      (let ((all (cl-loop for servers being the hash-values of eglot--servers-by-project
                          append (cl-remove-if-not
                                  (lambda (s) (cl-typep s 'interpreter-lsp-server))
                                  servers)))
            (here (expand-file-name default-directory)))
        (or (cl-find-if (lambda (s)
                          (string-prefix-p
                           (expand-file-name (project-root (eglot--project s))) here))
                        all)
            (car all)))
      (user-error "No interpreter-lsp server: M-x eglot in a Python file \
\(after `interpreter-lsp-setup')")))

(defun interpreter-lsp--command (server command args)
  "Send COMMAND with ARGS (a plist) to SERVER and return its result.
The server's error message becomes a `user-error'."
  (unwind-protect
      (condition-case err
          (jsonrpc-request server :workspace/executeCommand
                           (list :command command
                                 :arguments (vector (or args (make-hash-table)))))
        (jsonrpc-error
         (user-error "%s" (interpreter-lsp--emacs-words
                           (or (alist-get 'jsonrpc-error-message (cdr err))
                               (format "%s" (cadr err)))))))
    (run-at-time 0 nil #'interpreter-lsp--drain server)))

(defun interpreter-lsp--drain (server)
  "Read the messages SERVER sent that still wait in its process buffer.
`jsonrpc-request' leaves the process filter by a `throw' when its answer
arrives (Emacs 28's jsonrpc): the messages read in the same chunk after
that answer stay unread until the server writes again.  A quick run's
output and its end came with the answer to `interpreter.run', and showed
only at the server's next word (minutes later, or never)."
  (let ((proc (ignore-errors (jsonrpc--process server))))
    (when (and (processp proc) (process-live-p proc) (fboundp 'jsonrpc--process-filter))
      (jsonrpc--process-filter proc ""))))

(defun interpreter-lsp--emacs-words (text)
  "TEXT from the server, with the way to trust a folder said for Emacs."
  (replace-regexp-in-string
   "Trust the workspace in your editor (VS Code: Manage Workspace Trust), then try again\\."
   "M-x interpreter-lsp-trust trusts this folder; then try again." text t t))

(defun interpreter-lsp--uri ()
  "The current file's URI (eglot renamed its function in 1.16)."
  (if (fboundp 'eglot-path-to-uri)
      (eglot-path-to-uri buffer-file-name)
    (with-no-warnings (eglot--path-to-uri buffer-file-name))))

(defun interpreter-lsp--managed-p (server)
  "Non-nil when eglot sends this buffer to SERVER."
  (and (bound-and-true-p eglot--managed-mode) buffer-file-name
       (eq (eglot-current-server) server)))

(defun interpreter-lsp--language ()
  (cond ((derived-mode-p 'python-mode) "python")
        ((derived-mode-p 'sh-mode) "shell")))

;;;###autoload
(defun interpreter-lsp-chat (text)
  "Ask the model TEXT.
An active region is what the question is about; else the file is."
  (interactive (list (read-string "Ask the model: ")))
  (let ((server (interpreter-lsp--server))
        (args (list :text text)))
    (when (interpreter-lsp--managed-p server)
      (eglot--signal-textDocument/didChange)
      (setq args (append args (list :uri (interpreter-lsp--uri))))
      (when (use-region-p)
        (setq args (append args (list :range (list :start (eglot--pos-to-lsp-position
                                                           (region-beginning))
                                                   :end (eglot--pos-to-lsp-position
                                                         (region-end))))))))
    (interpreter-lsp--line server nil "")
    (with-current-buffer (interpreter-lsp-output-buffer server)
      (unless (= (point-min) (point-max))
        (interpreter-lsp--insert server nil "\n")))
    (interpreter-lsp--line server nil (concat ">>> " text) 'bold)
    (interpreter-lsp--display server)
    (plist-get (interpreter-lsp--command server "interpreter.chat" args) :turnId)))

;;;###autoload
(defun interpreter-lsp-run ()
  "Run the region, else the `# %%' cell at point, else the whole file.
Return the run's id; its output shows in the output buffer."
  (interactive)
  (let* ((server (interpreter-lsp--server))
         (managed (interpreter-lsp--managed-p server))
         (language (interpreter-lsp--language))
         (args
          (cond
           ((use-region-p)
            (append (list :code (buffer-substring-no-properties (region-beginning)
                                                                (region-end)))
                    (and language (list :language language))
                    (and managed (list :uri (interpreter-lsp--uri)))))
           (managed
            ;; The server finds the cell in its copy of the file: send edits first.
            (eglot--signal-textDocument/didChange)
            (list :uri (interpreter-lsp--uri)
                  ;; On the empty line after the last newline, the cell is the one above.
                  :position (list :line (1- (line-number-at-pos
                                             (if (and (eobp) (bolp) (not (bobp))) (1- (point)) (point))
                                             t))
                                  :character 0)))
           (t (user-error "Select the code to run: this buffer is not a file \
interpreter-lsp manages")))))
    (when (use-region-p) (deactivate-mark))
    (plist-get (interpreter-lsp--command server "interpreter.run" args) :runId)))

(defun interpreter-lsp--newest-proposal (server)
  (or (car (interpreter-lsp--proposals server))
      (user-error "No proposal waits for approval")))

;;;###autoload
(defun interpreter-lsp-approve ()
  "Run the newest proposal that waits for approval; return the run's id."
  (interactive)
  (let* ((server (interpreter-lsp--server))
         (id (plist-get (interpreter-lsp--newest-proposal server) :proposalId)))
    (plist-get (interpreter-lsp--command server "interpreter.approve"
                                         (list :proposalId id))
               :runId)))

;;;###autoload
(defun interpreter-lsp-reject (&optional reason)
  "Decline the newest proposal: the turn ends.
With a prefix argument, tell the model REASON: it is asked again at once."
  (interactive (list (and current-prefix-arg (read-string "Why not? "))))
  (let* ((server (interpreter-lsp--server))
         (id (plist-get (interpreter-lsp--newest-proposal server) :proposalId)))
    (interpreter-lsp--command server "interpreter.reject"
                              (append (list :proposalId id)
                                      (and reason (list :reason reason))))
    (interpreter-lsp--forget server :proposalId id)))

;;;###autoload
(defun interpreter-lsp-interrupt ()
  "Interrupt running code and queued runs, stop the model, end the turn."
  (interactive)
  (interpreter-lsp--command (interpreter-lsp--server) "interpreter.interrupt" nil))

(defun interpreter-lsp-restart-kernel ()
  "Restart the python kernel (its variables are lost)."
  (interactive)
  (interpreter-lsp--command (interpreter-lsp--server)
                            "interpreter.restartKernel" nil))

(defun interpreter-lsp-reset ()
  "Start a new conversation (the kernel keeps its state)."
  (interactive)
  (interpreter-lsp--command (interpreter-lsp--server) "interpreter.reset" nil))

(defun interpreter-lsp-undo ()
  "Take back the last request and what followed it (or your last run).
The workspace files and the python variables its runs changed come back
as they were; the output buffer says what came back and what could not."
  (interactive)
  (let* ((server (interpreter-lsp--server))
         (text (interpreter-lsp--undo-text
                (interpreter-lsp--command server "interpreter.undo" nil))))
    (interpreter-lsp--line server nil text)
    (message "%s" text)))

(defun interpreter-lsp-redo ()
  "Bring back what the last undo took back: the request and its runs.
The files and python variables come back as its runs left them; the
output buffer says what came back and what could not.  Once something
new happened after the undo there is nothing to redo (the server says so)."
  (interactive)
  (let* ((server (interpreter-lsp--server))
         (text (interpreter-lsp--redo-text
                (interpreter-lsp--command server "interpreter.redo" nil))))
    (interpreter-lsp--line server nil text)
    (message "%s" text)))

(defun interpreter-lsp--undo-text (result)
  "What an undo RESULT says: what left the conversation, what came back, what not."
  (concat "↶ Undone: "
          (if (stringp (plist-get result :request))
              "your last message and what followed it are gone from the conversation"
            "your last run is gone from the conversation")
          (interpreter-lsp--restored-text result)))

(defun interpreter-lsp--redo-text (result)
  "What a redo RESULT says: what is back, in the conversation and the workspace.
A redo answers in the undo's shape: its files and variables read alike."
  (concat "↷ Redone: "
          (if (stringp (plist-get result :request))
              "your last message and what followed it are back in the conversation"
            "your last run is back in the conversation")
          (interpreter-lsp--restored-text result)))

(defun interpreter-lsp--restored-text (result)
  "What an undo or redo RESULT did to files and variables, and what it could not."
  (let* ((names (lambda (key) (mapconcat #'identity (append (plist-get result key) nil) ", ")))
         (files (delq nil (list (and (> (length (plist-get result :restored)) 0)
                                     (concat "restored " (funcall names :restored)))
                                (and (> (length (plist-get result :removed)) 0)
                                     (concat "removed " (funcall names :removed))))))
         (variables (delq nil (list (and (> (length (plist-get result :variablesRestored)) 0)
                                         (concat "restored " (funcall names :variablesRestored)))
                                    (and (> (length (plist-get result :variablesRemoved)) 0)
                                         (concat "removed " (funcall names :variablesRemoved))))))
         (lost (mapcar (lambda (item) (format "%s (%s)" (plist-get item :name) (plist-get item :why)))
                       (append (plist-get result :notRestorable) nil))))
    (concat (if files (concat "; files " (string-join files "; ")) "")
            (if variables (concat "; variables " (string-join variables "; ")) "")
            (if lost (concat ". Not restored: " (string-join lost "; ") ".") "."))))

(defcustom interpreter-lsp-verify-timeout 600
  "Seconds a verified export (`interpreter-lsp-export-notebook' with a prefix
argument) may take to re-run the notebook before it is stopped."
  :type 'number)

(defun interpreter-lsp-export-notebook (path &optional verify)
  "Write the conversation as a notebook at PATH (inside the workspace).
With a prefix argument (VERIFY), re-run it in a fresh kernel afterwards:
the output buffer says whether it reproduces, and each cell that does not,
with why.  That runs in the background; `interpreter-lsp-interrupt' stops it."
  (interactive
   (list (read-file-name (if current-prefix-arg "Export and verify as: " "Export as: ")
                         (interpreter-lsp--server-root (interpreter-lsp--server))
                         nil nil "interpreter-session.ipynb")
         current-prefix-arg))
  (let* ((server (interpreter-lsp--server))
         (path (expand-file-name path (interpreter-lsp--server-root server))))
    (if (not verify)
        (let ((result (interpreter-lsp--command server "interpreter.exportNotebook" (list :path path))))
          (message "Notebook written: %s" (plist-get result :path)))
      (interpreter-lsp--line server nil (format "(verifying %s: re-running it in a fresh kernel)"
                                                (file-name-nondirectory path)))
      (jsonrpc-async-request
       server :workspace/executeCommand
       (list :command "interpreter.exportNotebook"
             :arguments (vector (list :path path :verify t
                                      :verifyTimeout interpreter-lsp-verify-timeout)))
       :timeout (+ interpreter-lsp-verify-timeout 30)
       :success-fn (lambda (result)
                     (let ((text (interpreter-lsp--verification-text result)))
                       (interpreter-lsp--line server nil (car text) (unless (cdr text) 'warning))
                       (message "%s" (car text))))
       :error-fn (lambda (error)
                   (let ((text (interpreter-lsp--emacs-words
                                (or (plist-get error :message) (format "%s" error)))))
                     (interpreter-lsp--line server nil (format "(verification failed: %s)" text) 'error)
                     (message "Verification failed: %s" text)))
       :timeout-fn (lambda ()
                     (interpreter-lsp--line server nil "(verification: no answer in time)" 'error))))))

(defun interpreter-lsp--verification-text (result)
  "What a verified export RESULT says, as (TEXT . REPRODUCES)."
  (let* ((name (file-name-nondirectory (or (plist-get result :path) "")))
         (v (plist-get result :verification))
         (differs (append (plist-get v :differs) nil))
         (not-run (or (plist-get v :notRun) 0))
         (seconds (format "%.1f s" (or (plist-get v :seconds) 0))))
    (cond
     ((null v) (cons (format "(notebook %s was written without verdicts)" name) nil))
     ((and (null differs) (zerop not-run))
      (cons (format "(notebook %s reproduces: %s the session's output again%s, in %s)"
                    name (if (eql (plist-get v :cells) 1) "its one cell gave"
                           (format "all %d cells gave" (plist-get v :cells)))
                    (if (> (or (plist-get v :equivalent) 0) 0)
                        (format " (%d equivalent: the same once addresses, ids, times and float noise are set aside)"
                                (plist-get v :equivalent))
                      "")
                    seconds)
            t))
     (t
      (cons (format "(notebook %s does not fully reproduce (%d of %d cells as in the session, %s): %s)"
                    name (+ (or (plist-get v :identical) 0) (or (plist-get v :equivalent) 0))
                    (plist-get v :cells) seconds
                    (mapconcat #'identity
                               (append (mapcar (lambda (d) (format "cell %d: %s" (plist-get d :cell)
                                                                   (plist-get d :cause)))
                                               differs)
                                       (and (> not-run 0)
                                            (list (format "%d not run (after an error or the stop)" not-run))))
                               "; "))
            nil)))))

(defun interpreter-lsp--project-root ()
  (let ((server (ignore-errors (interpreter-lsp--server))))
    (cond (server (interpreter-lsp--server-root server))
          ((project-current) (project-root (project-current)))
          (t default-directory))))

;;;###autoload
(defun interpreter-lsp-trust (&optional folder)
  "Trust FOLDER (default: this project's root): code may run in it.
Remembered in `interpreter-lsp-trust-file'; folders inside it are
trusted too.  A running server is told at once."
  (interactive)
  (let* ((folder (interpreter-lsp--folder (or folder (interpreter-lsp--project-root))))
         (folders (interpreter-lsp--trusted-folders)))
    (unless (member folder folders)
      (interpreter-lsp--save-trusted (append folders (list folder))))
    (interpreter-lsp--tell-trust folder t)
    (message "interpreter-lsp: trusted %s (M-x interpreter-lsp-untrust withdraws it)" folder)))

;;;###autoload
(defun interpreter-lsp-untrust (&optional folder)
  "Withdraw trust in FOLDER (default: this project's root): nothing runs there."
  (interactive)
  (let ((folder (interpreter-lsp--folder (or folder (interpreter-lsp--project-root)))))
    (interpreter-lsp--save-trusted
     (cl-remove-if (lambda (f) (string-prefix-p (interpreter-lsp--folder f) folder))
                   (interpreter-lsp--trusted-folders)))
    (interpreter-lsp--tell-trust folder nil)
    (message "interpreter-lsp: %s is not trusted: nothing runs in it" folder)))

(defun interpreter-lsp--tell-trust (folder trusted)
  "Tell the running servers under FOLDER that it is TRUSTED (or not)."
  (cl-loop for servers being the hash-values of eglot--servers-by-project
           do (dolist (s servers)
                (when (and (cl-typep s 'interpreter-lsp-server) (jsonrpc-running-p s)
                           (string-prefix-p folder (interpreter-lsp--folder
                                                    (interpreter-lsp--server-root s))))
                  (interpreter-lsp--command s "interpreter.setTrusted"
                                            (list :trusted (if trusted t :json-false)))
                  (interpreter-lsp--line
                   s nil (if trusted
                             (format "trusted %s: code may run here now" folder)
                           (format "%s is not trusted: nothing runs here" folder))
                   (if trusted 'success 'warning))))))

(defun interpreter-lsp-show-output ()
  "Show the output buffer."
  (interactive)
  (display-buffer (interpreter-lsp-output-buffer)))

(provide 'interpreter-lsp)
;;; interpreter-lsp.el ends here
