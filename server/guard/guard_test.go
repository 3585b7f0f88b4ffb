package guard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/signet-pki/signet/server/guard"
)

// recorder is what a Guard reported: panics by door, undecodable messages by method, and the
// log.
type recorder struct {
	mu        sync.Mutex
	panics    map[string]int
	malformed map[string]string
	log       bytes.Buffer
}

// panicsAt is how many panics were counted at door.
func (r *recorder) panicsAt(door string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.panics[door]
}

// malformedAt is what Malformed was told of method, and whether it was.
func (r *recorder) malformedAt(method string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err, ok := r.malformed[method]
	return err, ok
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.Write(p)
}

// logLines are the JSON log lines so far.
func (r *recorder) logLines(t *testing.T) []map[string]any {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.log.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func newGuard() (*guard.Guard, *recorder) {
	r := &recorder{panics: map[string]int{}, malformed: map[string]string{}}
	g := guard.New(guard.Options{
		Log: slog.New(slog.NewJSONHandler(r, nil)),
		Panicked: func(door string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.panics[door]++
		},
		Internal: status.Error(codes.Internal, "internal error"),
		Malformed: func(_ context.Context, method string, err error) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.malformed[method] = err.Error()
			return status.Error(codes.InvalidArgument, "malformed: "+err.Error())
		},
	})
	return g, r
}

// healthServer panics at one of two sites, by the service asked for, and otherwise answers
// SERVING with the service's name echoed in nothing: what the guard must contain.
type healthServer struct {
	healthpb.UnimplementedHealthServer
}

func (healthServer) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	switch req.GetService() {
	case "nil":
		var m map[string]int
		m["x"]++ // a nil map write: a runtime panic
	case "explicit":
		panic("explicit panic")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (healthServer) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	if req.GetService() == "explicit" {
		panic("explicit panic in a stream")
	}
	return stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// serve runs a gRPC server with g's options and the panicking health service on loopback.
func serve(t *testing.T, g *guard.Guard) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(g.ServerOptions()...)
	healthpb.RegisterHealthServer(srv, healthServer{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestGRPCPanicsAreContained: a panic in a unary or a stream handler is answered with
// Options.Internal, counted under the method, and logged at ERROR naming its site, with the
// stack only the first time that site panics; the server goes on answering.
func TestGRPCPanicsAreContained(t *testing.T) {
	t.Parallel()
	g, rec := newGuard()
	client := healthpb.NewHealthClient(serve(t, g))
	for _, svc := range []string{"nil", "explicit", "nil"} {
		_, err := client.Check(callCtx(t), &healthpb.HealthCheckRequest{Service: svc})
		if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "internal error") {
			t.Errorf("Check(%s) after a panic: %v, want Options.Internal", svc, err)
		}
	}
	stream, err := client.Watch(callCtx(t), &healthpb.HealthCheckRequest{Service: "explicit"})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Internal {
		t.Errorf("Watch after a panic: %v, want Internal", err)
	}
	if resp, err := client.Check(callCtx(t), &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("the server does not answer after contained panics: %v, %v", resp, err)
	}
	if check, watch := rec.panicsAt("/grpc.health.v1.Health/Check"), rec.panicsAt("/grpc.health.v1.Health/Watch"); check != 3 || watch != 1 {
		t.Errorf("panics counted: Check %d, Watch %d; want 3 and 1", check, watch)
	}
	stacks := map[string]int{}
	lines := rec.logLines(t)
	for _, l := range lines {
		if l["level"] != "ERROR" || !strings.HasPrefix(l["msg"].(string), "panic contained") {
			t.Errorf("log line %v: want an ERROR about a contained panic", l)
			continue
		}
		site, _ := l["site"].(string)
		if !strings.Contains(site, "guard_test.go") || !strings.Contains(site, "healthServer") {
			t.Errorf("site %q: want the panicking method in guard_test.go", site)
		}
		if stack, ok := l["stack"].(string); ok {
			stacks[site]++
			if !strings.HasPrefix(stack, strings.Fields(site)[0]) {
				t.Errorf("stack %q does not begin at the site %q", stack, site)
			}
		}
	}
	if len(lines) != 4 || len(stacks) != 3 {
		t.Errorf("%d log lines, stacks by site %v; want 4 lines, one stack for each of the 3 sites", len(lines), stacks)
	}
	for site, n := range stacks {
		if n != 1 {
			t.Errorf("site %s logged its stack %d times, want once", site, n)
		}
	}
}

// rawCodec sends bytes as they are, named "proto" so that the server decodes them.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = bytes.Clone(data)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestUndecodableMessages: a message that does not decode (invalid UTF-8 in a string field,
// truncated) is answered with Options.Malformed (not grpc-go's Internal), for unary calls and
// streams; the handler never sees it, and a valid message after it is served.
func TestUndecodableMessages(t *testing.T) {
	t.Parallel()
	g, rec := newGuard()
	conn := serve(t, g)
	invalid := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("a\xffb"))
	truncated := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.BytesType), 100)
	for name, body := range map[string][]byte{"invalid UTF-8": invalid, "truncated": truncated} {
		var out []byte
		err := conn.Invoke(callCtx(t), "/grpc.health.v1.Health/Check", &body, &out, grpc.ForceCodec(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("%s: %v, want Options.Malformed's InvalidArgument", name, err)
		}
		desc := &grpc.StreamDesc{ServerStreams: true}
		stream, err := conn.NewStream(callCtx(t), desc, "/grpc.health.v1.Health/Watch", grpc.ForceCodec(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.SendMsg(&body); err != nil {
			t.Fatal(err)
		}
		_ = stream.CloseSend()
		if err := stream.RecvMsg(&out); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s stream: %v, want InvalidArgument", name, err)
		}
	}
	if told, _ := rec.malformedAt("/grpc.health.v1.Health/Check"); !strings.Contains(told, "invalid UTF-8") && !strings.Contains(told, "cannot parse") {
		t.Errorf("Malformed was told %q of Check", told)
	}
	if _, ok := rec.malformedAt("/grpc.health.v1.Health/Watch"); !ok {
		t.Error("Malformed was not told of the stream's message")
	}
	if resp, err := healthpb.NewHealthClient(conn).Check(callCtx(t), &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("a valid message after them: %v, %v", resp, err)
	}
}

// TestHTTPPanicsAreContained: a panic before the answer began is answered by the door's
// internal handler and counted; one after it began aborts the response (the client sees no
// forged answer) and is counted; http.ErrAbortHandler is net/http's, not a failure, and is
// neither counted nor answered.
func TestHTTPPanicsAreContained(t *testing.T) {
	t.Parallel()
	g, rec := newGuard()
	internal := func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "internal", http.StatusInternalServerError)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/before", func(http.ResponseWriter, *http.Request) { panic("before the answer") })
	mux.HandleFunc("/after", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		panic("after the answer began")
	})
	mux.HandleFunc("/abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	srv := httptest.NewServer(g.HTTP("door", internal)(mux))
	srv.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/before")
	if err != nil || resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("a panic before the answer: %v, %v; want 500 from the internal handler", resp, err)
	}
	_ = resp.Body.Close()
	resp, err = srv.Client().Get(srv.URL + "/after")
	if err == nil {
		_, err = bytes.NewBuffer(nil).ReadFrom(resp.Body)
		_ = resp.Body.Close()
	}
	if err == nil {
		t.Errorf("a panic after the answer began: the response completed, want it aborted")
	}
	if _, err := srv.Client().Get(srv.URL + "/abort"); err == nil {
		t.Errorf("http.ErrAbortHandler: the response completed, want it aborted")
	}
	if n := rec.panicsAt("door"); n != 2 {
		t.Errorf("%d panics counted, want 2 (ErrAbortHandler is not one)", n)
	}
}
