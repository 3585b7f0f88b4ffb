package controlplane

import (
	"io"
	"regexp"
	"strings"
	"sync"
)

// tailSize bounds the output kept per process for error messages.
const tailSize = 256 << 10

// problemLine matches the lines that say why a process failed: cobra's "Error: ...", klog's
// error and fatal lines ("E0102 15:04:05.000000 ...", "F0102 ...") and etcd's JSON ones.
var problemLine = regexp.MustCompile(`^(Error: |[EF]\d{4} |\{"level":"(error|fatal)")`)

// tail keeps the last tailSize bytes written to it. It is safe for concurrent use.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

// newTail returns an empty tail.
func newTail() *tail { return &tail{} }

// Write appends p, dropping the oldest bytes beyond tailSize.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// explain returns a summary of the kept output for an error message: the last problem lines
// if there are any, else the last lines. It is empty when the process wrote nothing.
func (t *tail) explain(name string) string {
	t.mu.Lock()
	text := string(t.buf)
	t.mu.Unlock()
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	var problems []string
	for _, l := range lines {
		if problemLine.MatchString(l) {
			problems = append(problems, l)
		}
	}
	pick := lastN(lines, 15)
	if len(problems) > 0 {
		pick = lastN(problems, 10)
	}
	return "\n" + name + " output (excerpt):\n\t" + strings.Join(pick, "\n\t")
}

// lastN returns the last n elements of s.
func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// tee writes to t and, if extra is not nil, to extra.
func tee(t *tail, extra io.Writer) io.Writer {
	if extra == nil {
		return t
	}
	return io.MultiWriter(t, extra)
}
