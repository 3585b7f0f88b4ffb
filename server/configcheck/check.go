// Package configcheck checks a signet-server configuration file as far as a start would,
// short of using a key, and creates nothing: signet-server --validate-config and signetctl
// validate server both run it, and signet-server runs it before it starts.
//
// On top of the configuration's own checks (strict decoding, defaults, config.Validate; a
// duration that is not one is reported with its field path and line), Files checks what the
// configuration names on disk:
//   - the TLS certificate, its key (the pair must match) and the client CA file;
//   - every signer CA: the certificate file holds exactly one CA certificate (basic
//     constraints CA:TRUE), the intermediates file parses, and a file key is readable by its
//     owner only (the server's rule for key files, keystore/pemfile), parses, and matches its
//     certificate (public keys equal). An encrypted PKCS#8 key whose passphrase file this
//     user cannot read is reported as a note: the match is not checked. A retired CA's key is
//     not looked at, as the server does not open it;
//   - PKCS#11 and TPM keys only by their URI's syntax and the files it names (module,
//     pin-source, blob): nothing talks to a device;
//   - the checkpoint key when one is configured (as a file key: mode, Ed25519 or P-256), the
//     witnessed checkpoint file, and ledger.dir, which must be a directory when it exists (it
//     is not created);
//   - attestation's EK roots, allow-list and boot-state reference file, with the loaders the
//     server uses (LoadTrust, LoadBootPolicy).
//
// Every problem is reported at once, each with its field path and, for a file, its line.
package configcheck

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/config/fieldscan"
)

// Problem is one error (or, with Note, one remark that does not make the file invalid) of a
// configuration: the field it concerns (its path, e.g. signers[0].maxLifetime; empty when
// the message names none), its line in the file when known, and the message.
type Problem struct {
	Field   string `json:"field,omitempty"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
	// Note marks a remark: something the check could not look at (an encrypted key whose
	// passphrase this user cannot read), not an error.
	Note bool `json:"note,omitempty"`
	// text is the error's message as written, for String when there is no line to add.
	text string
}

// String is the problem as one line: "field (line N): message", or the message as written
// when its line is not known ("ledger.dir is required …").
func (p Problem) String() string {
	switch {
	case p.text != "" && strings.Contains(p.text, "(line "):
		return p.text // the decoder's message names its line already
	case p.Field != "" && p.Line > 0:
		return fmt.Sprintf("%s (line %d): %s", p.Field, p.Line, p.Message)
	case p.text != "":
		return p.text
	case p.Field != "":
		return fmt.Sprintf("%s: %s", p.Field, p.Message)
	}
	return p.Message
}

// Result is what File found.
type Result struct {
	// Config is the configuration as loaded (defaults applied, the adjustments made); nil
	// when the file could not be decoded.
	Config *config.Config
	// Problems are the errors, in the order found; the file is valid without any.
	Problems []Problem
	// Notes are the remarks on a file that may be valid.
	Notes []Problem
}

// Overridden says that field's value came from a command-line flag, not the file: its problems
// name the flag instead of the field's line in the file.
func (r *Result) Overridden(field, flag string) {
	for i, p := range r.Problems {
		if p.Field == field {
			p.Line = 0
			p.text = fmt.Sprintf("%s (set by %s): %s", p.Field, flag, p.Message)
			r.Problems[i] = p
		}
	}
}

// Valid reports whether the file has no problem.
func (r Result) Valid() bool { return r.Config != nil && len(r.Problems) == 0 }

// File loads the configuration file at path as signet-server does, applies adjust to it (the
// command-line overrides; nil for none), validates it, checks the files it names (Files) and
// runs the extra checks (the server's own, such as its lint gates, which this package does
// not carry). The error is for a file that cannot be read at all; everything else is in the
// Result.
func File(path string, adjust func(*config.Config), extra ...func(*config.Config) []error) (Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Result{}, fmt.Errorf("reading config: %w", err)
	}
	cfg, readErrs, err := config.Read(path)
	var errs []error
	var notes []error
	switch {
	case err != nil:
		errs = append(readErrs, fieldscan.Split(err)...)
		cfg = nil
	default:
		if adjust != nil {
			adjust(cfg)
		}
		errs = append(readErrs, fieldscan.Split(cfg.Validate())...)
		for _, check := range extra {
			errs = append(errs, check(cfg)...)
		}
		files, fileNotes := Files(cfg)
		errs = append(errs, files...)
		notes = fileNotes
	}
	r := Result{Config: cfg}
	lines := fieldscan.Lines(data)
	for _, e := range errs {
		r.Problems = append(r.Problems, toProblem(e, lines))
	}
	for _, e := range notes {
		p := toProblem(e, lines)
		p.Note = true
		r.Notes = append(r.Notes, p)
	}
	return r, nil
}

// contextPrefix is the context the loader puts before a message.
var contextPrefix = regexp.MustCompile(`^(?:loading server config: )?(?:parsing config [^:]+: |config [^:]+: )`)

// toProblem splits an error into its field path, line and message, and finds the line of a
// field the message does not give one for.
func toProblem(err error, lines map[string]int) Problem {
	msg := contextPrefix.ReplaceAllString(err.Error(), "")
	f := fieldscan.Parse(msg, topField)
	if f.Field == "" {
		return Problem{Message: msg}
	}
	p := Problem{Field: f.Field, Line: f.Line, Message: f.Message, text: msg}
	if p.Line == 0 {
		p.Line = fieldscan.Line(lines, p.Field)
	}
	return p
}

// topField reports whether a single word starting a message is a top-level field of the
// configuration rather than an ordinary word.
func topField(w string) bool {
	switch w {
	case "apiVersion", "kind", "signers", "clients", "reloadInterval", "grpc", "http", "tls", "ledger",
		"keys", "lint", "idempotency", "webhook", "attestation":
		return true
	}
	return false
}
