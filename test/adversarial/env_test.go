package adversarial

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/server/servertest"
)

// The signers the server serves.
const (
	signerClient  = "kubernetes.io/kube-apiserver-client"
	signerKubelet = "kubernetes.io/kube-apiserver-client-kubelet"
	signerServing = "kubernetes.io/kubelet-serving"
	signerLegacy  = "kubernetes.io/legacy-unknown"
	signerCustom  = "example.com/serving"
	signerLimited = "example.com/limited"
	signerDev     = devpki.DefaultSigner            // custom, permissive (the dev configuration)
	signerPod     = devpki.DefaultPodIdentitySigner // pod-identity
)

// maxLifetime is every signer's maximum lifetime (the configuration default).
const maxLifetime = 24 * time.Hour

// The clients, by the key cases name them with. The first four are configured; the rest
// must fail the TLS handshake.
const (
	clientWatcher  = "watcher"  // devpki's signet-watcher identity, every signer
	clientTool     = "tool"     // a tool allowed some signers
	clientNobody   = "nobody"   // configured, allowed no signer
	clientFlooder  = "flooder"  // one signer, a low rate limit
	clientStranger = "stranger" // a valid certificate for an identity not configured
	clientForeign  = "foreign"  // the tool's identity, from another CA
	clientExpired  = "expired"  // the tool's identity, expired
	clientWrongEKU = "wrongeku" // the tool's identity, server auth only
	clientNoCert   = "nocert"   // no client certificate
)

// identities are the mTLS identities of the configured clients (ledger Client field).
var identities = map[string]string{
	clientWatcher: devpki.ClientName,
	clientTool:    "adversarial-tool",
	clientNobody:  "adversarial-nobody",
	clientFlooder: "adversarial-flooder",
}

// Rate limits. The rates are so low that no token comes back during the run, so the flood
// sequences are deterministic.
var (
	flooderRate = access.Rate{PerSecond: 0.001, Burst: 4}
	limitedRate = access.Rate{PerSecond: 0.001, Burst: 3}
)

// toolSigners are the signers the tool may use.
var toolSigners = []string{signerClient, signerLegacy, signerCustom}

// env is a running signet-server with its signers' CAs and one connection per client.
type env struct {
	dir       string
	ledgerDir string
	addr      string
	httpAddr  string
	conns     map[string]*grpc.ClientConn
	cas       map[string]*x509.Certificate // signer name → the CA its leaves chain to
	profiles  map[string]string            // signer name → profile name
	stop      func()
}

// startEnv creates the dev PKI, adds the corpus's signers and clients and serves until the
// test ends (or stop).
func startEnv(t *testing.T) *env {
	t.Helper()
	cfg, dir := servertest.DevConfig(t, devpki.Options{PodIdentitySigner: devpki.DefaultPodIdentitySigner})
	e := &env{dir: dir, ledgerDir: cfg.Ledger.Dir, conns: map[string]*grpc.ClientConn{},
		cas: map[string]*x509.Certificate{}, profiles: map[string]string{}}
	e.configure(t, cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the corpus's configuration is invalid: %v", err)
	}
	e.serve(t, cfg)
	e.dialAll(t)
	return e
}

// configure adds the signers and clients to the dev configuration.
func (e *env) configure(t *testing.T, cfg *config.Config) {
	t.Helper()
	for i := range cfg.Signers {
		s := &cfg.Signers[i]
		if s.Name == signerPod {
			s.Profile.PodIdentity = &profile.PodIdentitySpec{AllowedAnnotations: []string{"example.com/purpose"}}
		}
		e.cas[s.Name] = readCert(t, s.Certificate)
		e.profiles[s.Name] = s.Profile.Name
		s.MaxLifetime = &metav1.Duration{Duration: maxLifetime}
	}
	add := func(name string, spec profile.Spec, rate *access.Rate) {
		ca := testpki.CA(t, func(c *x509.Certificate) {
			c.Subject = pkix.Name{CommonName: "adversarial CA for " + name}
			c.NotBefore, c.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(365*24*time.Hour)
		})
		base := filepath.Join(e.dir, filepath.Base(name))
		writeFile(t, base+".crt", testpki.CertPEM(ca.Cert))
		writeFile(t, base+".key", testpki.KeyPEM(t, ca.Key))
		cfg.Signers = append(cfg.Signers, config.Signer{Name: name, Key: base + ".key", Certificate: base + ".crt",
			MaxLifetime: &metav1.Duration{Duration: maxLifetime}, Profile: spec, RateLimit: rate})
		e.cas[name], e.profiles[name] = ca.Cert, spec.Name
	}
	add(signerClient, profile.Spec{Name: profile.NameKubeAPIServerClient}, nil)
	add(signerKubelet, profile.Spec{Name: profile.NameKubeAPIServerClientKubelet}, nil)
	add(signerServing, profile.Spec{Name: profile.NameKubeletServing}, nil)
	add(signerLegacy, profile.Spec{Name: profile.NameLegacyUnknown}, nil)
	add(signerCustom, customSpec(), nil)
	add(signerLimited, customSpec(), &limitedRate)
	cfg.Clients = append(cfg.Clients,
		access.Client{Identity: identities[clientTool], Signers: toolSigners},
		access.Client{Identity: identities[clientNobody], Signers: []string{}},
		access.Client{Identity: identities[clientFlooder], Signers: []string{signerCustom}, RateLimit: &flooderRate},
	)
}

// customSpec is a custom serving profile that names what it issues.
func customSpec() profile.Spec {
	return profile.Spec{Name: profile.NameCustom, Custom: &profile.CustomSpec{
		Subject: profile.SubjectSpec{CommonNames: []string{"*.example.com"}, Organizations: []string{"Example"}},
		SANs: profile.SANSpec{DNS: []string{"*.example.com", "**.svc.cluster.local"}, IP: []string{"10.0.0.0/8"},
			URI: []string{"spiffe://cluster.local/ns/*/sa/*"}, Email: []string{"*@example.com"}, Required: true},
		Usages:   profile.UsageSpec{Allowed: []string{"digital signature", "key encipherment", "server auth", "client auth"}, Required: []string{"server auth"}},
		KeyTypes: []string{"ECDSA-P256", "ECDSA-P384", "RSA-2048", "RSA-3072"},
	}}
}

// serve runs server.New and Serve in-process; stop ends it (also at the end of the test).
func (e *env) serve(t *testing.T, cfg *config.Config) {
	t.Helper()
	r := servertest.Start(t, cfg, slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug})))
	e.stop = r.Stop
	e.httpAddr = r.HTTPAddr()
	e.addr = r.Addr
}

// dialAll opens one connection per client, each with its own certificate.
func (e *env) dialAll(t *testing.T) {
	t.Helper()
	tlsCA := readCert(t, filepath.Join(e.dir, devpki.TLSCACert))
	tlsKey := readKeyPair(t, filepath.Join(e.dir, devpki.TLSCACert), filepath.Join(e.dir, devpki.TLSCAKey))
	authority := &testpki.Authority{Cert: tlsCA, Key: tlsKey}
	foreign := testpki.CA(t)
	now := time.Now()
	client := func(ca *testpki.Authority, cn string, modify func(*x509.Certificate)) []tls.Certificate {
		key := testpki.Key(t, testpki.P256)
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: cn},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			NotBefore:   now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		}
		if modify != nil {
			modify(tmpl)
		}
		cert := ca.Sign(t, tmpl, key.Public())
		return []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}}
	}
	watcher, err := tls.LoadX509KeyPair(filepath.Join(e.dir, devpki.ClientCert), filepath.Join(e.dir, devpki.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	tool := identities[clientTool]
	certs := map[string][]tls.Certificate{
		clientWatcher:  {watcher},
		clientTool:     client(authority, tool, nil),
		clientNobody:   client(authority, identities[clientNobody], nil),
		clientFlooder:  client(authority, identities[clientFlooder], nil),
		clientStranger: client(authority, "adversarial-stranger", nil),
		clientForeign:  client(foreign, tool, nil),
		clientExpired: client(authority, tool, func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = now.Add(-48*time.Hour), now.Add(-24*time.Hour)
		}),
		clientWrongEKU: client(authority, tool, func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		}),
		clientNoCert: nil,
	}
	pool := x509.NewCertPool()
	pool.AddCert(tlsCA)
	for name, c := range certs {
		creds := credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: c, MinVersion: tls.VersionTLS13})
		conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		e.conns[name] = conn
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	certs := parseChain(t, readFile(t, path))
	if len(certs) != 1 {
		t.Fatalf("%s holds %d certificates, want 1", path, len(certs))
	}
	return certs[0]
}

func readKeyPair(t *testing.T, certPath, keyPath string) crypto.Signer {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		t.Fatalf("%s is not a signing key", keyPath)
	}
	return key
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
