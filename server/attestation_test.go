package server_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
	"google.golang.org/grpc/codes"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/attestation/nodetpm"
	"github.com/signet-pki/signet/internal/tpmsimtest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/profile"
)

// The attested signers of these tests.
const (
	tpmSigner      = "signet.dev/kube-apiserver-client-kubelet-tpm"
	servingSigner  = "signet.dev/kubelet-serving-tpm"
	insecureSigner = "signet.dev/kube-apiserver-client-kubelet-insecure"
)

// simTPM is the process's TPM simulator, as a node's TPM (internal/tpmsimtest).
var simTPM transport.TPM

// nodeTPM is the simulator as a node's TPM.
func nodeTPM(t *testing.T) *nodetpm.TPM {
	t.Helper()
	simTPM = tpmsimtest.Open(t)
	return nodetpm.New(simTPM)
}

// attestedConfig adds the TPM and insecure kubelet client signers (on the dev CA) and
// attestation, trusting node's EK by the allow-list, to the dev configuration.
func attestedConfig(t *testing.T, node *nodetpm.TPM) func(*config.Config) {
	return func(cfg *config.Config) {
		keys, err := node.Keys()
		if err != nil {
			t.Fatal(err)
		}
		fp, err := attestation.EKFingerprint(keys.EKPublic)
		if err != nil {
			t.Fatal(err)
		}
		allow := filepath.Join(t.TempDir(), "ek-allow-list")
		if err := os.WriteFile(allow, []byte("# the simulator\n"+fp+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		dev := cfg.Signers[0]
		for _, s := range []struct{ name, profile string }{{tpmSigner, profile.NameKubeletClientTPM}, {insecureSigner, profile.NameKubeletClientInsecure},
			{servingSigner, profile.NameKubeletServingTPM}} {
			cfg.Signers = append(cfg.Signers, config.Signer{Name: s.name, Key: dev.Key, Certificate: dev.Certificate,
				MaxLifetime: dev.MaxLifetime, Rotation: dev.Rotation, Profile: profile.Spec{Name: s.profile}})
		}
		cfg.Attestation = config.Attestation{Address: "127.0.0.1:0", EKAllowListFile: allow}
		for i := range cfg.Clients {
			cfg.Clients[i].Signers = []string{"*"}
		}
	}
}

// post sends a JSON call to the attestation endpoint and decodes the answer into out (a 200)
// or returns the refusal.
func (s *testServer) post(t *testing.T, path string, in, out any) (int, attestErr) {
	t.Helper()
	body, _ := json.Marshal(in)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: s.clientTLS(t)}}
	rsp, err := client.Post("https://"+s.srv.AttestationAddr()+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	data, _ := io.ReadAll(rsp.Body)
	if rsp.StatusCode != http.StatusOK {
		var e attestErr
		_ = json.Unmarshal(data, &e)
		return rsp.StatusCode, e
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, data)
	}
	return rsp.StatusCode, attestErr{}
}

type attestErr struct{ Check, Message string }

// attestAs runs the node agent's exchange with the server for nodeName and returns the
// request (for a client certificate: no SANs) with its evidence.
func (s *testServer) attestAs(t *testing.T, node *nodetpm.TPM, nodeName string) []byte {
	t.Helper()
	return s.attestWith(t, node, nodeName, nil, nil)
}

// attestWith is attestAs for a request with the SANs dns and ips.
func (s *testServer) attestWith(t *testing.T, node *nodetpm.TPM, nodeName string, dns []string, ips []net.IP) []byte {
	t.Helper()
	return attestVia(t, node, nodeName, dns, ips, s, s)
}

// attestVia is attestWith with the challenge asked of one server and answered to another (a
// fleet's).
func attestVia(t *testing.T, node *nodetpm.TPM, nodeName string, dns []string, ips []net.IP, challengeOn, activateOn *testServer) []byte {
	t.Helper()
	keys, err := node.Keys()
	if err != nil {
		t.Fatal(err)
	}
	var ch attestation.Challenge
	if code, e := challengeOn.post(t, "/attest/v1/challenge", attestation.ChallengeRequest{Node: nodeName, EKCertificate: keys.EKCertificate,
		EKPublic: keys.EKPublic, AKPublic: keys.AKPublic}, &ch); code != http.StatusOK {
		t.Fatalf("challenge: %d %+v", code, e)
	}
	secret, err := node.Activate(keys, ch)
	if err != nil {
		t.Fatal(err)
	}
	var act attestation.Activation
	if code, e := activateOn.post(t, "/attest/v1/activate", attestation.ActivationRequest{ID: ch.ID, Secret: secret}, &act); code != http.StatusOK {
		t.Fatalf("activate: %d %+v", code, e)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ext, _ := attestation.ProviderIDExtension("signet://test/" + nodeName)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:         pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
		ExtraExtensions: []pkix.Extension{ext},
		DNSNames:        dns, IPAddresses: ips,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	spki, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	c, err := node.Certify(act.Nonce, spki)
	if err != nil {
		t.Fatal(err)
	}
	ev := nodetpm.Evidence(keys, act.Ticket, c)
	if len(act.QuotePCRs) > 0 {
		q, err := node.Quote(act.Nonce, act.QuotePCRs)
		if err != nil {
			t.Fatal(err)
		}
		ev = nodetpm.WithQuote(ev, q)
	}
	full, err := attestation.Encode(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), ev)
	if err != nil {
		t.Fatal(err)
	}
	return full
}

// kubeletClientRequest is a kubelet's client certificate request for signer, made with a
// bootstrap token.
func kubeletClientRequest(signer string, csrPEM []byte, uid string) *signetv1.SignCertificateSigningRequestRequest {
	return &signetv1.SignCertificateSigningRequestRequest{
		SignerName: signer,
		Request:    csrPEM,
		Usages:     []string{"digital signature", "client auth"},
		Requester:  &signetv1.Requester{Username: "system:bootstrap:abcdef", Groups: []string{"system:bootstrappers", "system:authenticated"}},
		Object:     &signetv1.KubernetesObject{Uid: uid, Name: "node-csr-" + uid},
	}
}

// devSignerName is the dev configuration's own signer, which takes no attestation.
const devSignerName = "signet.dev/dev"

// verifyRequest is the VerifyAttestation request of a signing request.
func verifyRequest(r *signetv1.SignCertificateSigningRequestRequest) *signetv1.VerifyAttestationRequest {
	return &signetv1.VerifyAttestationRequest{SignerName: r.GetSignerName(), Request: r.GetRequest(), Usages: r.GetUsages(),
		ExpirationSeconds: r.ExpirationSeconds, Requester: r.GetRequester(), Object: r.GetObject(), NodeAddresses: r.GetNodeAddresses()}
}

// records returns the ledger's records.
func records(t *testing.T, dir string) []ledger.Record {
	t.Helper()
	var out []ledger.Record
	if err := ledger.Replay(dir, ledger.Record{}.Time, func(r ledger.Record) error { out = append(out, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAttestedKubeletClientCertificate(t *testing.T) {
	node := nodeTPM(t)
	cfg, dir := devConfig(t)
	attestedConfig(t, node)(cfg)
	s, stop := runServer(t, cfg, dir)
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))

	// A request the signer's rules refuse (server auth on a client signer) binds nothing.
	wrong := kubeletClientRequest(tpmSigner, s.attestAs(t, node, "node-x"), "uid-0")
	wrong.Usages = []string{"digital signature", "server auth"}
	_, err := client.SignCertificateSigningRequest(callContext(t), wrong)
	wantStatus(t, err, codes.FailedPrecondition, "POLICY_VIOLATION")
	for _, r := range records(t, cfg.Ledger.Dir) {
		if r.Decision == ledger.Bound {
			t.Fatalf("a refused request bound its EK: %+v", r)
		}
	}

	// The node joins: evidence for node-a, requested with a bootstrap token. The approver
	// verifies it first: that spends nothing, binds nothing.
	full := s.attestAs(t, node, "node-a")
	for range 2 {
		v, err := client.VerifyAttestation(callContext(t), verifyRequest(kubeletClientRequest(tpmSigner, full, "uid-1")))
		if err != nil || v.GetNode() != "node-a" || !v.GetFirstUse() || v.GetEkTrust() != "allow-list" || v.GetProviderId() != "signet://test/node-a" {
			t.Fatalf("VerifyAttestation = %v, %v", v, err)
		}
	}
	_, err = client.VerifyAttestation(callContext(t), verifyRequest(kubeletClientRequest(devSignerName, full, "uid-1")))
	wantStatus(t, err, codes.FailedPrecondition, "POLICY_VIOLATION")
	rsp, err := client.SignCertificateSigningRequest(callContext(t), kubeletClientRequest(tpmSigner, full, "uid-1"))
	if err != nil {
		t.Fatalf("signing the attested request: %v", err)
	}
	leaf := parsePEMCerts(t, []byte(rsp.GetCertificateChainPem()))[0]
	if leaf.Subject.CommonName != "system:node:node-a" {
		t.Fatalf("issued CN %q", leaf.Subject.CommonName)
	}
	// The same object and request get the same certificate again (a watcher's retry).
	again, err := client.SignCertificateSigningRequest(callContext(t), kubeletClientRequest(tpmSigner, full, "uid-1"))
	if err != nil || again.GetCertificateChainPem() != rsp.GetCertificateChainPem() {
		t.Fatalf("retry: %v; same chain: %v", err, err == nil && again.GetCertificateChainPem() == rsp.GetCertificateChainPem())
	}
	// The ledger holds the binding, then the issuance with its grounds.
	var bound, issued *ledger.Record
	for _, r := range records(t, cfg.Ledger.Dir) {
		switch {
		case r.Decision == ledger.Bound:
			bound = &r
		case r.Decision == ledger.Issued && r.Signer == tpmSigner:
			issued = &r
		}
	}
	if bound == nil || bound.Node != "node-a" || issued == nil || bound.Seq > issued.Seq ||
		!strings.Contains(issued.Grounds, `attested: node "node-a", EK `+bound.EK) || !strings.Contains(issued.Grounds, "bootstrap") {
		t.Fatalf("bound record %+v, issued record %+v", bound, issued)
	}

	refused := func(name string, req *signetv1.SignCertificateSigningRequestRequest, code codes.Code, reason, says string) {
		t.Helper()
		_, err := client.SignCertificateSigningRequest(callContext(t), req)
		wantStatus(t, err, code, reason)
		if !strings.Contains(err.Error(), says) {
			t.Fatalf("%s: %v; want it to say %q", name, err, says)
		}
	}
	// The same evidence in another object: the ticket is single-use, for the approver too.
	refused("replayed evidence", kubeletClientRequest(tpmSigner, full, "uid-2"), codes.FailedPrecondition, "ATTESTATION_FAILED", "ticket single use")
	_, err = client.VerifyAttestation(callContext(t), verifyRequest(kubeletClientRequest(tpmSigner, full, "uid-2")))
	wantStatus(t, err, codes.FailedPrecondition, "ATTESTATION_FAILED")
	// Fresh evidence of the bound node: no longer a first use.
	if v, err := client.VerifyAttestation(callContext(t), verifyRequest(kubeletClientRequest(tpmSigner, s.attestAs(t, node, "node-a"), "uid-9"))); err != nil || v.GetFirstUse() {
		t.Fatalf("VerifyAttestation of the bound node = %v, %v", v, err)
	}
	// The TPM bound to node-a asks for node-b, with a valid ticket for node-b.
	refused("node A's EK for node B", kubeletClientRequest(tpmSigner, s.attestAs(t, node, "node-b"), "uid-3"),
		codes.FailedPrecondition, "ATTESTATION_FAILED", `is bound to node "node-a"`)
	// Evidence for node-a, asked for by another node: the kubelet rules still apply (the
	// requester must be the node of the common name, or a bootstrapper).
	otherNode := kubeletClientRequest(tpmSigner, s.attestAs(t, node, "node-a"), "uid-cn")
	otherNode.Requester = &signetv1.Requester{Username: "system:node:node-z", Groups: []string{"system:nodes", "system:authenticated"}}
	refused("a common name that is not the requester", otherNode, codes.FailedPrecondition, "POLICY_VIOLATION", `the requester is neither the node nor in a bootstrap group`)
	// A request without evidence, and one with an unsupported version.
	csr := bytes.SplitAfter(full, []byte("-----END CERTIFICATE REQUEST-----\n"))[0]
	refused("no evidence", kubeletClientRequest(tpmSigner, csr, "uid-4"), codes.InvalidArgument, "MALFORMED_REQUEST", "ATTESTATION PROVIDER block is missing")
	v9 := append(append([]byte{}, csr...), []byte("-----BEGIN KUBELET AUTHENTICATOR ATTESTATION PROVIDER-----\ndHBt\n-----END KUBELET AUTHENTICATOR ATTESTATION PROVIDER-----\n")...)
	v9 = append(v9, pem.EncodeToMemory(&pem.Block{Type: attestation.BlockData, Bytes: []byte(`{"version":"signet.tpm/v9"}`)})...)
	refused("an unsupported version", kubeletClientRequest(tpmSigner, v9, "uid-5"), codes.InvalidArgument, "MALFORMED_REQUEST", "supported: "+attestation.VersionV1)
	// The insecure signer signs the bare request, and says so.
	rsp, err = client.SignCertificateSigningRequest(callContext(t), kubeletClientRequest(insecureSigner, csr, "uid-6"))
	if err != nil {
		t.Fatalf("insecure signer: %v", err)
	}
	if !s.logs.Contains("INSECURE signer") {
		t.Fatal("no INSECURE warning at start")
	}

	// After a restart the binding still holds: it is rebuilt from the ledger.
	stop()
	s, stop = runServer(t, cfg, dir)
	client = signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	refused("node A's EK for node B after a restart", kubeletClientRequest(tpmSigner, s.attestAs(t, node, "node-b"), "uid-7"),
		codes.FailedPrecondition, "ATTESTATION_FAILED", `is bound to node "node-a"`)
	if _, err := client.SignCertificateSigningRequest(callContext(t), kubeletClientRequest(tpmSigner, s.attestAs(t, node, "node-a"), "uid-8")); err != nil {
		t.Fatalf("node-a after a restart: %v", err)
	}

	// An admin clears node-a's binding (its board was replaced): recorded, and the EK may
	// then join as node-b. A client without the admin role is refused; so is a node with no
	// binding.
	authority := signetv1.NewAuthorityServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	forget := &signetv1.ForgetAttestationBindingRequest{SignerName: tpmSigner, Node: "node-a", Reason: "board replaced"}
	_, err = authority.ForgetAttestationBinding(callContext(t), forget)
	wantStatus(t, err, codes.PermissionDenied, "ADMIN_REQUIRED")
	stop()
	for i := range cfg.Clients {
		cfg.Clients[i].Admin = true
	}
	s, stop = runServer(t, cfg, dir)
	client = signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	authority = signetv1.NewAuthorityServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	got, err := authority.ForgetAttestationBinding(callContext(t), forget)
	if err != nil || got.GetEk() == "" || got.GetLedgerSeq() == 0 {
		t.Fatalf("ForgetAttestationBinding = %v, %v", got, err)
	}
	_, err = authority.ForgetAttestationBinding(callContext(t), forget)
	wantStatus(t, err, codes.NotFound, "NOT_FOUND")
	if _, err := client.SignCertificateSigningRequest(callContext(t), kubeletClientRequest(tpmSigner, s.attestAs(t, node, "node-b"), "uid-10")); err != nil {
		t.Fatalf("the EK joining as node-b after the binding was cleared: %v", err)
	}
	// The clearing survives a restart: node-b holds the EK now, node-a is refused.
	stop()
	s, _ = runServer(t, cfg, dir)
	client = signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	refused("node A after the EK moved to node B", kubeletClientRequest(tpmSigner, s.attestAs(t, node, "node-a"), "uid-11"),
		codes.FailedPrecondition, "ATTESTATION_FAILED", `is bound to node "node-b"`)
	var unbound int
	for _, r := range records(t, cfg.Ledger.Dir) {
		if r.Decision == ledger.Unbound && r.Node == "node-a" && strings.Contains(r.Message, "board replaced") {
			unbound++
		}
	}
	if unbound != 1 {
		t.Fatalf("%d unbound records for node-a, want 1", unbound)
	}

	var grounds []string
	for _, r := range records(t, cfg.Ledger.Dir) {
		if r.Decision == ledger.Issued && r.Signer == insecureSigner {
			grounds = append(grounds, r.Grounds)
		}
	}
	if len(grounds) != 1 || !strings.Contains(grounds[0], profile.InsecureGrounds) {
		t.Fatalf("insecure issuance grounds %q", grounds)
	}
}

func TestAttestationEndpointRefuses(t *testing.T) {
	node := nodeTPM(t)
	s := startServer(t, attestedConfig(t, node))
	keys, err := node.Keys()
	if err != nil {
		t.Fatal(err)
	}
	challenge := func() attestation.Challenge {
		var ch attestation.Challenge
		if code, e := s.post(t, "/attest/v1/challenge", attestation.ChallengeRequest{Node: "node-a", EKPublic: keys.EKPublic, AKPublic: keys.AKPublic}, &ch); code != http.StatusOK {
			t.Fatalf("challenge: %d %+v", code, e)
		}
		return ch
	}
	for _, tc := range []struct {
		name  string
		path  string
		in    any
		code  int
		check attestation.Check
	}{
		{"a wrong secret", "/attest/v1/activate", attestation.ActivationRequest{ID: challenge().ID, Secret: []byte("guess")}, http.StatusForbidden, attestation.CheckChallenge},
		{"an unknown challenge", "/attest/v1/activate", attestation.ActivationRequest{ID: "00", Secret: []byte("x")}, http.StatusForbidden, attestation.CheckChallenge},
		{"an EK that is not allowed", "/attest/v1/challenge", attestation.ChallengeRequest{Node: "node-a", EKPublic: otherEK(t, node), AKPublic: keys.AKPublic},
			http.StatusForbidden, attestation.CheckEKTrust},
		{"a node name that is not one", "/attest/v1/challenge", attestation.ChallengeRequest{Node: "Node_A", EKPublic: keys.EKPublic, AKPublic: keys.AKPublic},
			http.StatusForbidden, attestation.CheckTicketNode},
		{"garbage", "/attest/v1/challenge", map[string]string{"nodeName": "x"}, http.StatusBadRequest, "request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, e := s.post(t, tc.path, tc.in, nil)
			if code != tc.code || e.Check != string(tc.check) {
				t.Fatalf("answer %d %+v; want %d and check %q", code, e, tc.code, tc.check)
			}
		})
	}
	// A challenge is answered once: the right secret after a wrong one is refused.
	ch := challenge()
	secret, err := node.Activate(keys, ch)
	if err != nil {
		t.Fatal(err)
	}
	s.post(t, "/attest/v1/activate", attestation.ActivationRequest{ID: ch.ID, Secret: []byte("guess")}, nil)
	if code, e := s.post(t, "/attest/v1/activate", attestation.ActivationRequest{ID: ch.ID, Secret: secret}, nil); code != http.StatusForbidden || e.Check != string(attestation.CheckChallenge) {
		t.Fatalf("second answer: %d %+v; want 403 challenge", code, e)
	}
	// Challenges for one EK are rate-limited (burst 5).
	limited := false
	for range 10 {
		if code, _ := s.post(t, "/attest/v1/challenge", attestation.ChallengeRequest{Node: "node-a", EKPublic: keys.EKPublic, AKPublic: keys.AKPublic}, &attestation.Challenge{}); code == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited {
		t.Fatal("10 challenges in a row for one EK were never rate-limited")
	}
}

// otherEK is the public area of the simulator's RSA EK: a real EK, not the allowed one.
func otherEK(t *testing.T, _ *nodetpm.TPM) []byte {
	t.Helper()
	rsp, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHEndorsement, InPublic: tpm2.New2B(tpm2.RSAEKTemplate)}.Execute(simTPM)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = tpm2.FlushContext{FlushHandle: rsp.ObjectHandle}.Execute(simTPM)
	return rsp.OutPublic.Bytes()
}

// TestAttestedServingCertificate: a kubelet-serving-tpm signer signs a node's serving
// certificate for the node's own addresses, as the watcher forwards them, and refuses
// (signing and approval alike) a SAN that is not one of them, naming it, and a request that
// came without the node's addresses.
func TestAttestedServingCertificate(t *testing.T) {
	node := nodeTPM(t)
	s := startServer(t, attestedConfig(t, node))
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	addrs := []*signetv1.NodeAddress{{Type: "InternalIP", Address: "10.0.0.7"}, {Type: "Hostname", Address: "node-a"}}
	serving := func(full []byte, uid string, addrs []*signetv1.NodeAddress) *signetv1.SignCertificateSigningRequestRequest {
		return &signetv1.SignCertificateSigningRequestRequest{
			SignerName: servingSigner, Request: full, Usages: []string{"digital signature", "server auth"},
			Requester: &signetv1.Requester{Username: "system:node:node-a", Groups: []string{"system:nodes", "system:authenticated"}},
			Object:    &signetv1.KubernetesObject{Uid: uid, Name: "csr-" + uid}, NodeAddresses: addrs,
		}
	}
	own := serving(s.attestWith(t, node, "node-a", []string{"node-a"}, []net.IP{net.ParseIP("10.0.0.7")}), "uid-1", addrs)
	if _, err := client.VerifyAttestation(callContext(t), verifyRequest(own)); err != nil {
		t.Fatalf("VerifyAttestation of the node's own addresses: %v", err)
	}
	rsp, err := client.SignCertificateSigningRequest(callContext(t), own)
	if err != nil {
		t.Fatalf("signing the node's serving certificate: %v", err)
	}
	if leaf := parsePEMCerts(t, []byte(rsp.GetCertificateChainPem()))[0]; len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.ParseIP("10.0.0.7")) {
		t.Fatalf("serving certificate IPs %v", leaf.IPAddresses)
	}
	foreign := serving(s.attestWith(t, node, "node-a", []string{"node-a"}, []net.IP{net.ParseIP("10.9.9.9")}), "uid-2", addrs)
	_, err = client.VerifyAttestation(callContext(t), verifyRequest(foreign))
	wantStatus(t, err, codes.FailedPrecondition, "POLICY_VIOLATION")
	if !strings.Contains(err.Error(), "IP address 10.9.9.9 is not one of the node's addresses") {
		t.Fatalf("approval refusal %v does not name the foreign IP", err)
	}
	_, err = client.SignCertificateSigningRequest(callContext(t), foreign)
	wantStatus(t, err, codes.FailedPrecondition, "POLICY_VIOLATION")
	if !strings.Contains(err.Error(), "10.9.9.9") {
		t.Fatalf("signing refusal %v does not name the foreign IP", err)
	}
	_, err = client.SignCertificateSigningRequest(callContext(t), serving(s.attestWith(t, node, "node-a", []string{"node-a"}, nil), "uid-3", nil))
	wantStatus(t, err, codes.FailedPrecondition, "POLICY_VIOLATION")
	if !strings.Contains(err.Error(), "no node addresses came with the request") {
		t.Fatalf("refusal %v", err)
	}
}

// TestAttestedBootState: with attestation.bootState on, the endpoint asks the node to quote
// the policy's PCRs, a node whose values are a reference set is signed (the grounds name the
// set), and the same node after a change of those PCRs (an update the reference file does not
// list yet) is refused by the boot-state check.
func TestAttestedBootState(t *testing.T) {
	node := nodeTPM(t)
	pcr16 := tpm2.AuthHandle{Handle: tpm2.TPMHandle(16), Auth: tpm2.PasswordAuth(nil)}
	if _, err := (tpm2.PCRReset{PCRHandle: pcr16}).Execute(simTPM); err != nil {
		t.Fatal(err)
	}
	q, err := node.Quote([]byte("read"), []int{16})
	if err != nil {
		t.Fatal(err)
	}
	refs := filepath.Join(t.TempDir(), "boot-references.yaml")
	if err := os.WriteFile(refs, []byte("references:\n- name: fw-2026-11\n  pcrs: {\"16\": \""+hex.EncodeToString(q.Values[0].Digest)+"\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, func(cfg *config.Config) {
		attestedConfig(t, node)(cfg)
		cfg.Attestation.BootState = &config.BootState{PCRs: []int{16}, ReferenceFile: refs}
	})
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	if _, err := client.SignCertificateSigningRequest(callContext(t), kubeletClientRequest(tpmSigner, s.attestAs(t, node, "node-a"), "uid-1")); err != nil {
		t.Fatalf("signing with a reference boot state: %v", err)
	}
	var grounds string
	for _, r := range records(t, s.dir+"/ledger") {
		if r.Decision == ledger.Issued {
			grounds = r.Grounds
		}
	}
	if !strings.Contains(grounds, `boot state "fw-2026-11"`) {
		t.Fatalf("issued grounds %q do not name the boot state", grounds)
	}
	m := sha256.Sum256([]byte("a new bootloader"))
	if _, err := (tpm2.PCRExtend{PCRHandle: pcr16, Digests: tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{HashAlg: tpm2.TPMAlgSHA256, Digest: m[:]}}}}).Execute(simTPM); err != nil {
		t.Fatal(err)
	}
	_, err = client.SignCertificateSigningRequest(callContext(t), kubeletClientRequest(tpmSigner, s.attestAs(t, node, "node-a"), "uid-2"))
	wantStatus(t, err, codes.FailedPrecondition, "ATTESTATION_FAILED")
	if !strings.Contains(err.Error(), "boot state: the boot state matches none of the 1 reference sets") {
		t.Fatalf("refusal %v", err)
	}
}
