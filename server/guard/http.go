package guard

import (
	"errors"
	"net/http"
)

// HTTP returns middleware that contains a panic in next, as the gRPC recovery does: counted
// and logged under door, and answered by internal (which writes the door's own 500 body) when
// nothing has been written yet. A panic after the answer began cannot change it: the
// connection is then closed, as net/http does for a panicking handler. http.ErrAbortHandler,
// net/http's own way to abort a response, is not a failure and goes on up.
func (g *Guard) HTTP(door string, internal http.HandlerFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tw := &trackingWriter{ResponseWriter: w}
			defer func() {
				p := recover()
				if p == nil {
					return
				}
				if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(p)
				}
				g.contained(door, p)
				if tw.wrote {
					panic(http.ErrAbortHandler) // the client sees the stream end, not a forged answer
				}
				internal(w, r)
			}()
			next.ServeHTTP(tw, r)
		})
	}
}

// trackingWriter records whether the answer has begun.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *trackingWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *trackingWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the underlying writer (flush, deadlines).
func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
