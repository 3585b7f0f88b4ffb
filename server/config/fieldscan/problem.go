package fieldscan

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// Problem is one error of a configuration file: the field it concerns (its path, e.g.
// signers[0].maxLifetime; empty when the message names none), its line in the file when
// known, and the message.
type Problem struct {
	Field   string `json:"field,omitempty"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// Split returns the errors joined in err (under any wrapping context such as "config PATH:"),
// err alone if it joins none, nothing for nil. Joins inside a joined error stay whole: their
// messages carry the path of their field ("signers[0].profile: …").
func Split(err error) []error {
	if err == nil {
		return nil
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
	}
	return []error{err}
}

var (
	// fieldPrefix matches a message that starts with a field path, maybe followed by its line:
	// "signers[0].maxLifetime: …", "ledger.dir is required", "workers (line 4): want a number…".
	fieldPrefix = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9]*(?:\[\d+\])?(?:[./][a-zA-Z][a-zA-Z0-9]*(?:\[\d+\])?)*)(?: \(line (\d+)\))?(?::\s*|\s+)(.*)$`)
	// quotedField matches a strict-decoding error: unknown field "server.adress" (line 6).
	quotedField = regexp.MustCompile(`^(?:.*: )?((?:unknown|duplicate) field) "([^"]+)"(?: \(line (\d+)\))?(.*)$`)
)

// Parse splits a configuration error's message into its field path, line (when the message
// gives it) and message. A single word starts a field path only when topField says it is a
// top-level field of the file (otherwise "tls: …" and "invalid …" would look alike); a
// message that starts with no field path (a YAML syntax error) is kept whole.
func Parse(msg string, topField func(string) bool) Problem {
	if m := quotedField.FindStringSubmatch(msg); m != nil {
		return Problem{Field: m[2], Line: atoi(m[3]), Message: m[1] + m[4]}
	}
	m := fieldPrefix.FindStringSubmatch(msg)
	if m == nil || !strings.ContainsAny(m[1], ".[/") && !topField(m[1]) {
		return Problem{Message: msg}
	}
	return Problem{Field: m[1], Line: atoi(m[2]), Message: m[3]}
}

// atoi is the number in s, 0 for none.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
