// Package guard contains failures at the signing server's front doors, so that no message can
// stop the process: a panic in a gRPC handler (unary or stream) or an HTTP handler is answered
// INTERNAL, counted (signet_server_panics_total{method}) and logged at ERROR, with its stack
// the first time its site panics; and a gRPC message that does not decode is answered
// INVALID_ARGUMENT with the MALFORMED_REQUEST reason, which a client treats as final, instead
// of grpc-go's Internal, which it retries.
//
// The handlers behind the doors validate every message before use (server/signerapi); the
// guard is the second line, for the bug no test found.
package guard

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
)

// Options configure a Guard.
type Options struct {
	// Log receives one ERROR line per contained panic (with the stack the first time its site
	// panics); nil discards.
	Log *slog.Logger
	// Panicked, if set, is told of every contained panic with its door: a gRPC method's full
	// name, or the HTTP handler's name (the metric's label).
	Panicked func(method string)
	// Internal is the error answered to a gRPC call that panicked: a status with code
	// Internal and the INTERNAL reason. Required for the gRPC interceptors.
	Internal error
	// Malformed answers a gRPC call whose message did not decode: method is its full name,
	// err protobuf's error. It returns the status to answer (INVALID_ARGUMENT,
	// MALFORMED_REQUEST; the front door may record the refusal first). Required for Codec.
	Malformed func(ctx context.Context, method string, err error) error
}

// Guard contains the failures of the doors it is installed on. It is safe for concurrent use.
type Guard struct {
	opts Options
	// sites are the panic sites whose stack has been logged.
	mu    sync.Mutex
	sites map[string]bool
}

// maxSites bounds the sites remembered: panic sites are places in the code, a bounded set,
// but a bound keeps a pathological one from growing the map.
const maxSites = 1024

// New returns a Guard with opts.
func New(opts Options) *Guard {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Guard{opts: opts, sites: map[string]bool{}}
}

// contained is run by a door's recovery with the panic value p, from the deferred function
// that recovered it (so that the panicking frames are still on the stack): it counts the
// panic, and logs it at ERROR with its site, the stack the first time the site panics.
func (g *Guard) contained(door string, p any) {
	if g.opts.Panicked != nil {
		g.opts.Panicked(door)
	}
	site, stack := panicSite()
	attrs := []any{"method", door, "site", site, "panic", clipValue(p)}
	if g.firstAt(site) {
		attrs = append(attrs, "stack", stack)
	}
	g.opts.Log.Error("panic contained: answered INTERNAL, the server goes on; this is a bug, please report it", attrs...)
}

// firstAt reports whether site has not panicked before (and remembers it).
func (g *Guard) firstAt(site string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sites[site] {
		return false
	}
	if len(g.sites) < maxSites {
		g.sites[site] = true
	}
	return true
}

// panicSite returns where the panic being recovered was raised, "function file:line" (the
// first frame below runtime.gopanic that is not the runtime's own, such as sigpanic for a nil
// dereference), and the panicking goroutine's stack from that frame down. It must be called,
// directly or not, from the deferred function that recovered the panic.
func panicSite() (site string, stack string) {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var b strings.Builder
	inPanic, found := false, false
	for {
		f, more := frames.Next()
		switch {
		case !inPanic:
			inPanic = f.Function == "runtime.gopanic"
		case !found && strings.HasPrefix(f.Function, "runtime."):
		default:
			if !found {
				found = true
				site = fmt.Sprintf("%s %s:%d", f.Function, f.File, f.Line)
			}
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			break
		}
	}
	if !found {
		return "unknown", ""
	}
	return site, b.String()
}

// maxValueBytes bounds what a log line shows of a panic's value.
const maxValueBytes = 512

// clipValue is the panic value as text, at most maxValueBytes (a rune cut in two, like any
// invalid byte, is dropped).
func clipValue(p any) string {
	s := fmt.Sprint(p)
	if len(s) <= maxValueBytes {
		return s
	}
	return strings.ToValidUTF8(s[:maxValueBytes], "") + "…"
}
