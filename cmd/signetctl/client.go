package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/signet-pki/signet/internal/devpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// defaultServer is the address signetctl dials without --server: signet-server's default
// gRPC address.
const defaultServer = "127.0.0.1:8443"

// connFlags are the flags every command that talks to signet-server shares.
type connFlags struct {
	server     string
	tlsCA      string
	tlsCert    string
	tlsKey     string
	serverName string
	devDir     string
	timeout    time.Duration
}

// register adds the connection flags to fs.
func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", defaultServer, "signet-server gRPC `host:port`")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM `file` of the CA that issued the server's TLS certificate")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM `file` of the client certificate (mTLS)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM `file` of the client certificate's private key")
	fs.StringVar(&c.serverName, "server-name", "", "`name` to verify in the server certificate (default: the host of --server)")
	fs.StringVar(&c.devDir, "dev-state-dir", "", "state `dir`ectory of `signet-server --dev`: supplies --tls-ca, --tls-cert and --tls-key ("+devpki.TLSCACert+", "+devpki.ClientCert+", "+devpki.ClientKey+")")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "deadline of the call to the server")
}

// resolve fills the TLS file flags from --dev-state-dir (explicit flags win) and reports the
// missing ones as a usage error.
func (c *connFlags) resolve() error {
	if c.devDir != "" {
		for _, f := range []struct {
			v    *string
			name string
		}{{&c.tlsCA, devpki.TLSCACert}, {&c.tlsCert, devpki.ClientCert}, {&c.tlsKey, devpki.ClientKey}} {
			if *f.v == "" {
				*f.v = filepath.Join(c.devDir, f.name)
			}
		}
	}
	var missing []string
	for _, f := range []struct{ v, name string }{{c.tlsCA, "--tls-ca"}, {c.tlsCert, "--tls-cert"}, {c.tlsKey, "--tls-key"}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: signet-server requires mutual TLS; give --tls-ca, --tls-cert and --tls-key, or --dev-state-dir DIR for a `signet-server --dev` state folder", strings.Join(missing, ", "))
	}
	if c.server == "" {
		return errors.New("--server must not be empty")
	}
	if c.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	return nil
}

// tlsConfig loads the CA and the client key pair: TLS 1.3 only, client certificate always sent.
func (c *connFlags) tlsConfig() (*tls.Config, error) {
	caPEM, err := os.ReadFile(c.tlsCA)
	if err != nil {
		return nil, fmt.Errorf("reading --tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("--tls-ca %s holds no PEM CERTIFICATE", c.tlsCA)
	}
	cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("loading client certificate --tls-cert %s / --tls-key %s: %w", c.tlsCert, c.tlsKey, err)
	}
	return &tls.Config{
		RootCAs:      pool,
		Certificates: []tls.Certificate{cert},
		ServerName:   c.serverName,
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
	}, nil
}

// dial returns a client for the server. The connection is made lazily, by the first call.
func (c *connFlags) dial() (signetv1.SignerServiceClient, io.Closer, error) {
	cfg, err := c.tlsConfig()
	if err != nil {
		return nil, nil, err
	}
	conn, err := grpc.NewClient(c.server, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return nil, nil, fmt.Errorf("server %s: %w", c.server, err)
	}
	return signetv1.NewSignerServiceClient(conn), conn, nil
}

// callContext bounds one call by --timeout.
func (c *connFlags) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// describeRPCError is the one-line account of a failed call: the status code and message,
// plus the google.rpc.ErrorInfo reason when the server sent one.
func describeRPCError(server string, err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := fmt.Sprintf("%s: %s", st.Code(), st.Message())
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
			msg += " (reason " + info.GetReason() + ")"
		}
	}
	switch st.Code() {
	case codes.Unavailable:
		msg += " [is signet-server running at " + server + ", and do --tls-ca and --server-name match its certificate?]"
	case codes.DeadlineExceeded:
		msg += " [no answer within --timeout]"
	}
	return msg
}

// parseInterspersed parses args with fs, allowing flags after positional arguments (the flag
// package stops at the first non-flag). "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// writeJSON prints m as protojson, re-indented with encoding/json so the output is stable
// (protojson deliberately varies its whitespace).
func writeJSON(w io.Writer, m proto.Message) error {
	data, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}

// outputFormat validates --output.
func outputFormat(v string) error {
	switch v {
	case "text", "json":
		return nil
	}
	return fmt.Errorf("--output must be text or json, not %q", v)
}

// terminalWidth is the width to wrap text written to w: $COLUMNS, else the terminal's width,
// else 100; never below 40.
func terminalWidth(w io.Writer) int {
	width := 100
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		width = n
	} else if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if n, _, err := term.GetSize(int(f.Fd())); err == nil && n > 0 {
			width = n
		}
	}
	return max(width, 40)
}

// wrap breaks text into lines of at most width runes (longer words stay whole). Newlines in
// text start new lines.
func wrap(text string, width int) []string {
	var lines []string
	for para := range strings.SplitSeq(text, "\n") {
		words := strings.Fields(para)
		if len(words) == 0 {
			lines = append(lines, "")
			continue
		}
		line := words[0]
		for _, w := range words[1:] {
			if len([]rune(line))+1+len([]rune(w)) > width {
				lines = append(lines, line)
				line = w
				continue
			}
			line += " " + w
		}
		lines = append(lines, line)
	}
	return lines
}

// writeWrapped prints first followed by text wrapped to width, continuation lines indented by
// indent spaces (first is expected to be indent runes wide).
func writeWrapped(w io.Writer, first string, text string, indent, width int) {
	lines := wrap(text, max(width-indent, 20))
	pad := strings.Repeat(" ", indent)
	for i, l := range lines {
		if i == 0 {
			fmt.Fprintf(w, "%s%s\n", first, l)
		} else {
			fmt.Fprintf(w, "%s%s\n", pad, l)
		}
	}
}
