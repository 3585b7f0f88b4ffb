package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/version"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/signerclient"
)

// defaultServer is the address signetctl dials when no setting names one: signet-server's
// default gRPC address.
const defaultServer = "127.0.0.1:8443"

// defaultTimeout bounds each call to the server when no setting says otherwise.
const defaultTimeout = 10 * time.Second

// connFlags are the connection flags of a command that talks to signet-server. After resolve,
// settings holds what applies: each setting from its flag, else its environment variable,
// else the config file, else the default.
type connFlags struct {
	cmd      *cobra.Command
	flags    connSettings
	devDir   string
	config   string
	settings connSettings
	// missingTLS is set by resolve when no source gives one of the TLS files.
	missingTLS bool
	// identity is the client identity of the certificate dial loaded.
	identity string
	// creds are the transport credentials dial made; they name a failed handshake
	// (callError).
	creds *signerclient.HandshakeCredentials
}

// addConnFlags adds the connection flags to cmd and returns them.
func addConnFlags(cmd *cobra.Command) *connFlags {
	c := &connFlags{cmd: cmd}
	fs := cmd.Flags()
	fs.StringVar(&c.flags.server, "server", "", "signet-server gRPC `host:port` (env "+envServer+"; default "+defaultServer+")")
	fs.StringVar(&c.flags.tlsCA, "tls-ca", "", "PEM `file` of the CA that issued the server's TLS certificate (env "+envTLSCA+")")
	fs.StringVar(&c.flags.tlsCert, "tls-cert", "", "PEM `file` of the client certificate, mTLS (env "+envTLSCert+")")
	fs.StringVar(&c.flags.tlsKey, "tls-key", "", "PEM `file` of the client certificate's private key (env "+envTLSKey+")")
	fs.StringVar(&c.flags.serverName, "server-name", "", "`name` to verify in the server certificate (env "+envServerName+"; default: the host of --server)")
	fs.StringVar(&c.devDir, "dev-state-dir", "", "state `dir`ectory of 'signet-server --dev': supplies --tls-ca, --tls-cert and --tls-key ("+
		devpki.TLSCACert+", "+devpki.ClientCert+", "+devpki.ClientKey+"; env "+envDevStateDir+")")
	fs.DurationVar(&c.flags.timeout, "timeout", 0, "deadline of each call to the server (env "+envTimeout+"; default "+defaultTimeout.String()+")")
	fs.StringVar(&c.config, "config", "", "connection settings `file` (env "+envConfig+"; default "+defaultConfigHint+"); see 'signetctl help connection'")
	for _, name := range []string{"tls-ca", "tls-cert", "tls-key", "config"} {
		_ = cmd.MarkFlagFilename(name)
	}
	_ = cmd.MarkFlagDirname("dev-state-dir")
	return c
}

// resolve merges flags, environment and config file into settings and checks them; the
// errors are usage errors.
func (c *connFlags) resolve() error {
	fs := c.cmd.Flags()
	flagLayer := c.flags
	if !fs.Changed("timeout") {
		flagLayer.timeout = 0
	} else if c.flags.timeout <= 0 {
		return usageError(c.cmd, "--timeout must be positive")
	}
	if fs.Changed("server") && c.flags.server == "" {
		return usageError(c.cmd, "--server must not be empty")
	}
	flagLayer.expandDevDir(c.devDir)
	envLayer, err := settingsFromEnv()
	if err != nil {
		return usageError(c.cmd, "%v", err)
	}
	fileLayer, err := settingsFromFile(c.config)
	if err != nil {
		return usageError(c.cmd, "%v", err)
	}
	c.settings = merge(flagLayer, envLayer, fileLayer, connSettings{server: defaultServer, timeout: defaultTimeout})
	var missing []string
	for _, f := range []struct{ v, name string }{{c.settings.tlsCA, "--tls-ca"}, {c.settings.tlsCert, "--tls-cert"}, {c.settings.tlsKey, "--tls-key"}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	c.missingTLS = len(missing) > 0
	if len(missing) > 0 {
		return usageError(c.cmd, "missing %s: signet-server requires mutual TLS; give --tls-ca, --tls-cert and --tls-key, "+
			"or --dev-state-dir DIR for a 'signet-server --dev' state folder (or set them in the environment or the config file: 'signetctl help connection')",
			strings.Join(missing, ", "))
	}
	return nil
}

// resolveOptional is resolve for a command whose call to the server is optional: ask is false,
// without error, when no source gives the TLS files; other problems are usage errors.
func (c *connFlags) resolveOptional() (ask bool, err error) {
	if err := c.resolve(); err != nil {
		if c.missingTLS {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// tlsConfig loads the CA and the client key pair: TLS 1.3 only, client certificate always
// sent. A client certificate that has expired or is not yet valid is refused here, with its
// dates, rather than by the server's handshake.
func (s connSettings) tlsConfig(now time.Time) (*tls.Config, error) {
	caPEM, err := os.ReadFile(s.tlsCA)
	if err != nil {
		return nil, fmt.Errorf("reading --tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("--tls-ca %s holds no PEM CERTIFICATE", s.tlsCA)
	}
	cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("loading client certificate --tls-cert %s / --tls-key %s: %w", s.tlsCert, s.tlsKey, err)
	}
	if leaf := cert.Leaf; leaf != nil {
		switch {
		case now.After(leaf.NotAfter):
			return nil, fmt.Errorf("the client certificate --tls-cert %s (%s) expired at %s; renew it", s.tlsCert, leaf.Subject, leaf.NotAfter.UTC().Format(time.RFC3339))
		case now.Before(leaf.NotBefore):
			return nil, fmt.Errorf("the client certificate --tls-cert %s (%s) is not valid before %s; check this host's clock", s.tlsCert, leaf.Subject, leaf.NotBefore.UTC().Format(time.RFC3339))
		}
	}
	return &tls.Config{
		RootCAs:      pool,
		Certificates: []tls.Certificate{cert},
		ServerName:   s.serverName,
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
	}, nil
}

// dial resolves the settings and returns a connection to the server; it is made lazily, by the
// first call, and goes to the server whatever its health (a call is never held back because
// the server reports NOT_SERVING). Errors are exit errors: a usage error, or unreadable TLS
// files (exit 2).
func (c *connFlags) dial() (*grpc.ClientConn, error) {
	if err := c.resolve(); err != nil {
		return nil, err
	}
	cfg, err := c.settings.tlsConfig(time.Now())
	if err != nil {
		return nil, inputError("%v", err)
	}
	leaf := cfg.Certificates[0].Leaf
	c.identity = access.Identity(leaf)
	c.creds = signerclient.NewHandshakeCredentials(credentials.NewTLS(cfg),
		signerclient.HandshakeOptions{ClientCertificate: func() *x509.Certificate { return leaf }})
	conn, err := grpc.NewClient(c.settings.server, grpc.WithTransportCredentials(c.creds), grpc.WithUserAgent("signetctl"),
		grpc.WithUnaryInterceptor(sendClientVersion(clientVersion)))
	if err != nil {
		return nil, inputError("server %s: %v", c.settings.server, err)
	}
	return conn, nil
}

// clientVersion is the version signetctl reports to the server (internal/version's); a
// variable so that tests can play an older or newer signetctl.
var clientVersion = version.Version

// sendClientVersion sends v as the client's version (signetv1.ClientVersionHeader) with every
// call but GetServerInfo, so that the server applies its skew policy to signetctl as to the
// watcher (docs/compatibility.md): a signetctl it does not accept is refused with
// UNSUPPORTED_CLIENT_VERSION and a message naming both versions (callError prints "refused
// (UNSUPPORTED_CLIENT_VERSION): …", exit 1). GetServerInfo goes without it, as a client that
// sends no version, which no server refuses: 'signetctl version' must show both builds
// precisely when they do not agree. signetctl makes no streaming calls.
func sendClientVersion(v string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method != signetv1.SignerService_GetServerInfo_FullMethodName {
			ctx = metadata.AppendToOutgoingContext(ctx, signetv1.ClientVersionHeader, v)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// callContext bounds one call by the timeout setting.
func (c *connFlags) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.settings.timeout)
}

// callError is the exit of a failed call (see the function callError); a call that failed
// because the TLS handshake did is named (signerclient.HandshakeError).
func (c *connFlags) callError(err error) error {
	if c.creds != nil {
		err = c.creds.Explain(err)
	}
	return callError(endpoint{server: c.settings.server, identity: c.identity}, err)
}
