package access

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
)

const (
	signerServing = "example.com/serving"
	signerClient  = "example.com/client"
	signerKubelet = "kubernetes.io/kubelet-serving"
	watcherID     = "spiffe://cluster.example/ns/signet-system/sa/signet-watcher"
	toolID        = "signet-tool"
)

var served = []string{signerServing, signerClient, signerKubelet}

func mustAuthorizer(t *testing.T, clients []Client) *Authorizer {
	t.Helper()
	a, err := NewAuthorizer(clients, served)
	if err != nil {
		t.Fatalf("NewAuthorizer: %v", err)
	}
	return a
}

func TestNewAuthorizerRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		clients []Client
		want    []string // substrings of the error
	}{
		{"empty identity", []Client{{Signers: []string{signerServing}}}, []string{"clients[0].identity: is empty"}},
		{"duplicate identity", []Client{{Identity: toolID}, {Identity: toolID}}, []string{"clients[1] (signet-tool).identity is listed twice"}},
		{"spaces", []Client{{Identity: " tool"}}, []string{"leading or trailing spaces"}},
		{"URI not canonical", []Client{{Identity: "spiffe://cluster.example/a b"}}, []string{`write the URI as "spiffe://cluster.example/a%20b"`}},
		{"unknown signer", []Client{{Identity: toolID, Signers: []string{"example.com/nope"}}}, []string{`clients[0] (signet-tool).signers: "example.com/nope" is not a signer this server serves`}},
		{"signer twice", []Client{{Identity: toolID, Signers: []string{signerClient, signerClient}}}, []string{`"example.com/client" is listed twice`}},
		{"star and names", []Client{{Identity: toolID, Signers: []string{"*", signerClient}}}, []string{`"*" already means every served signer`}},
		{"negative rate", []Client{{Identity: toolID, RateLimit: &Rate{PerSecond: -1}}}, []string{"clients[0] (signet-tool).rateLimit: perSecond -1 must be a positive number"}},
		{"negative burst", []Client{{Identity: toolID, RateLimit: &Rate{PerSecond: 1, Burst: -2}}}, []string{"burst -2 is negative"}},
		{"zero rate", []Client{{Identity: toolID, RateLimit: &Rate{}}}, []string{"perSecond 0 must be a positive number"}},
		{
			"every problem at once",
			[]Client{{Identity: "", Signers: []string{"x/y"}}, {Identity: toolID, RateLimit: &Rate{PerSecond: -1}}},
			[]string{"clients[0].identity: is empty", `clients[0].signers: "x/y"`, "clients[1] (signet-tool).rateLimit"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewAuthorizer(tt.clients, served)
			if err == nil {
				t.Fatalf("NewAuthorizer = %v, want an error", a)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestAuthorizerAllowedAndSignersFor(t *testing.T) {
	a := mustAuthorizer(t, []Client{
		{Identity: watcherID, Signers: []string{"*"}, RateLimit: &Rate{PerSecond: 10, Burst: 20}},
		{Identity: toolID, Signers: []string{signerServing, signerClient}},
		{Identity: "reader"},
	})
	tests := []struct {
		identity, signer string
		want             bool
	}{
		{watcherID, signerServing, true},
		{watcherID, signerKubelet, true},
		{watcherID, "example.com/not-served", false},
		{watcherID, "*", false},
		{toolID, signerServing, true},
		{toolID, signerClient, true},
		{toolID, signerKubelet, false},
		{"reader", signerServing, false},
		{"stranger", signerServing, false},
		{"", signerServing, false},
	}
	for _, tt := range tests {
		if got := a.Allowed(tt.identity, tt.signer); got != tt.want {
			t.Errorf("Allowed(%q, %q) = %v, want %v", tt.identity, tt.signer, got, tt.want)
		}
	}

	signersFor := []struct {
		identity string
		want     []string
	}{
		{watcherID, []string{signerClient, signerServing, signerKubelet}},
		{toolID, []string{signerClient, signerServing}},
		{"reader", []string{}},
		{"stranger", nil},
	}
	for _, tt := range signersFor {
		got := a.SignersFor(tt.identity)
		if !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("SignersFor(%q) = %#v, want %#v", tt.identity, got, tt.want)
		}
	}
	// The result is a copy.
	a.SignersFor(toolID)[0] = "mutated"
	if !a.Allowed(toolID, signerClient) {
		t.Error("mutating SignersFor's result changed the Authorizer")
	}
}

func TestNilAuthorizerAllowsNothing(t *testing.T) {
	var a *Authorizer
	if a.Known(toolID) || a.Allowed(toolID, signerServing) || a.SignersFor(toolID) != nil {
		t.Error("a nil Authorizer allowed something")
	}
	empty := mustAuthorizer(t, nil)
	if empty.Known(toolID) || empty.Allowed(toolID, signerServing) {
		t.Error("an Authorizer without clients allowed something")
	}
}

func TestIdentity(t *testing.T) {
	u1, _ := url.Parse(watcherID)
	u2, _ := url.Parse("spiffe://cluster.example/second")
	tests := []struct {
		name string
		cert *x509.Certificate
		want string
	}{
		{"first URI SAN wins over CN", &x509.Certificate{URIs: []*url.URL{u1, u2}, Subject: pkix.Name{CommonName: toolID}}, watcherID},
		{"CN without URI SAN", &x509.Certificate{Subject: pkix.Name{CommonName: toolID}}, toolID},
		{"neither", &x509.Certificate{}, ""},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		if got := Identity(tt.cert); got != tt.want {
			t.Errorf("%s: Identity = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestVerifyConnection(t *testing.T) {
	p := newPKI(t)
	a := mustAuthorizer(t, []Client{
		{Identity: watcherID, Signers: []string{"*"}},
		{Identity: toolID, Signers: []string{signerClient}},
	})
	chain := func(c tls.Certificate) tls.ConnectionState {
		return tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c.Leaf, p.ca.Cert}}}
	}
	tests := []struct {
		name    string
		state   tls.ConnectionState
		wantErr string
	}{
		{"URI SAN identity", chain(p.watcher), ""},
		{"CN identity", chain(p.tool), ""},
		{"unknown client", chain(p.stranger), `unknown client "spiffe://cluster.example/ns/default/sa/stranger"`},
		{"no identity at all", chain(p.anonymous), `unknown client ""`},
		{"no verified chain", tls.ConnectionState{PeerCertificates: []*x509.Certificate{p.watcher.Leaf}}, "no verified client certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := a.VerifyConnection(tt.state)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("VerifyConnection: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnknownClient) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("VerifyConnection = %v, want ErrUnknownClient containing %q", err, tt.wantErr)
			}
		})
	}
}

// testPKI is a client CA with a server certificate and client certificates.
type testPKI struct {
	ca                                 *testpki.Authority
	server                             tls.Certificate
	watcher, tool, stranger, anonymous tls.Certificate
}

func newPKI(t *testing.T) *testPKI {
	t.Helper()
	ca := testpki.CA(t)
	p := &testPKI{ca: ca}
	p.server = leaf(t, ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "signet-server"},
		DNSNames:    []string{"signet.test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	client := func(cn, uri string) tls.Certificate {
		tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if uri != "" {
			u, err := url.Parse(uri)
			if err != nil {
				t.Fatal(err)
			}
			tmpl.URIs = []*url.URL{u}
		}
		return leaf(t, ca, tmpl)
	}
	p.watcher = client("signet-watcher", watcherID)
	p.tool = client(toolID, "")
	// The stranger's CN is a configured identity, but its URI SAN names it, and that wins.
	p.stranger = client(toolID, "spiffe://cluster.example/ns/default/sa/stranger")
	p.anonymous = client("", "")
	return p
}

func leaf(t *testing.T, ca *testpki.Authority, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	key := testpki.Key(t, testpki.P256)
	cert := ca.Sign(t, tmpl, key.Public())
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

func TestCallerRole(t *testing.T) {
	served := []string{"example.com/a"}
	a, err := NewAuthorizer([]Client{
		{Identity: "watcher", Signers: []string{"*"}},
		{Identity: "tool", Signers: []string{"*"}, Role: RolePrincipal, Groups: []string{"ops"}},
		{Identity: "fwd", Signers: []string{"*"}, Role: RoleForwarder},
	}, served)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]Caller{
		"watcher": {Identity: "watcher", Role: RoleForwarder},
		"fwd":     {Identity: "fwd", Role: RoleForwarder},
		"tool":    {Identity: "tool", Role: RolePrincipal, Groups: []string{"ops"}},
		"nobody":  {Identity: "nobody", Role: RoleForwarder},
	} {
		if got := a.Caller(id); got.Identity != want.Identity || got.Role != want.Role || !slices.Equal(got.Groups, want.Groups) {
			t.Errorf("Caller(%s) = %+v, want %+v", id, got, want)
		}
	}
	for _, bad := range []Client{
		{Identity: "x", Role: "admin"},
		{Identity: "x", Groups: []string{"ops"}},
		{Identity: "x", Role: RoleForwarder, Groups: []string{"ops"}},
	} {
		if _, err := NewAuthorizer([]Client{bad}, served); err == nil {
			t.Errorf("NewAuthorizer accepted %+v", bad)
		}
	}
}
