package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"io"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/signet-pki/signet/internal/atomicfile"
	"github.com/signet-pki/signet/internal/duration"
	"github.com/signet-pki/signet/internal/tlspki"
	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/pemfile"
)

// pkiIssueLong is the help of pki issue, before the exit codes.
const pkiIssueLong = `Makes a client certificate for another client of the server (an operator running signetctl,
a webhook client, another watcher) from the client CA that 'pki init' made in DIR:

  NAME.crt, NAME.key    client auth only, common name NAME; with --identity, that URI as its
                        only URI SAN. Key 0600, certificate 0644, each written atomically.

The server names a client by the first URI SAN of its certificate, else its common name
(server/access Identity): the identity is --identity when given, else NAME. The certificate
does not decide what the client may do: the server config does. pki issue prints on standard
output the clients entry to add to the server config (then restart signet-server); --admin only
adds "admin: true" to that entry (the client may then rotate its signers' CAs: signetctl ca
stage, activate, retire, status). The certificate is the same with or without --admin.

Existing NAME.crt and NAME.key are never replaced without --force (which issues them again
with a new key: how such a certificate is renewed); the names of the files 'pki init' writes
(server, watcher, server-ca, clients-ca) are refused: 'pki renew' renews those. The
certificate lives for --validity (90 days by default), never past the client CA's own expiry
(a warning says when the CA cuts it short). The summary on standard error says how to call the
server with it; no key is printed.`

// reservedClientNames are the names whose files pki init writes.
var reservedClientNames = []string{"server", "watcher", "server-ca", "clients-ca"}

// clientRequest is what pki issue issues.
type clientRequest struct {
	name      string   // the common name and the files' base name
	identity  *url.URL // the only URI SAN, or nil: the identity is then name
	algorithm string
	validity  time.Duration
}

// pkiIssueCommand is "signetctl pki issue".
func pkiIssueCommand() *cobra.Command {
	var (
		dir, name, identity string
		admin, force        bool
		req                 = clientRequest{algorithm: tlspki.DefaultAlgorithm, validity: tlspki.DefaultValidity}
	)
	cmd := &cobra.Command{
		Use:   "issue --dir DIR --client NAME [--identity URI] [--admin] [--validity 90d] [flags]",
		Short: "Make a client certificate (an operator's, a webhook client's) from the client CA in DIR",
		Long:  pkiIssueLong + "\n\n" + exitCodesHelp,
		Example: `  signetctl pki issue --dir ./signet-pki --client admin --admin
  signetctl pki issue --dir ./signet-pki --client ca-admin --identity spiffe://prod.example.com/ops/ca-admin --admin --validity 30d
  signetctl pki issue --dir ./signet-pki --client kube-webhook --validity 365d`,
		Args: cobra.NoArgs,
	}
	flags := cmd.Flags()
	flags.StringVar(&dir, "dir", "", "the `folder` 'pki init' wrote (its clients-ca.crt and clients-ca.key sign)")
	flags.StringVar(&name, "client", "", "the client's `name`: the certificate's common name (its identity without --identity) and the files NAME.crt, NAME.key")
	flags.StringVar(&identity, "identity", "", "the client's identity `URI` (e.g. spiffe://prod.example.com/ops/ca-admin), its only URI SAN; default: the identity is NAME")
	flags.BoolVar(&admin, "admin", false, "print the clients entry with admin: true (the server config, not the certificate, gives the role)")
	flags.Var(duration.Var(&req.validity), "validity", "lifetime of the certificate: days (90d) or a Go duration (2160h)")
	flags.StringVar(&req.algorithm, "algorithm", tlspki.DefaultAlgorithm, "the algorithm of the client's key: "+strings.Join(tlspki.Algorithms, ", "))
	flags.BoolVar(&force, "force", false, "replace an existing NAME.crt and NAME.key")
	pkiCompletions(cmd)
	for _, f := range []string{"client", "identity"} {
		_ = cmd.RegisterFlagCompletionFunc(f, cobra.NoFileCompletions)
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		req.name = name
		req.algorithm = canonicalAlgorithm(req.algorithm)
		if err := req.check(dir, identity); err != nil {
			return usageError(cmd, "%v", err)
		}
		certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if !force {
			found, err := tlspki.Existing(certPath, keyPath)
			if err != nil {
				return inputError("%v", err)
			}
			if len(found) > 0 {
				return failure("refusing to overwrite existing files (--force replaces them): %s", strings.Join(found, ", "))
			}
		}
		ca, err := readClientCA(dir)
		if err != nil {
			return pkiFileError(err)
		}
		kp, clamped, err := issueClient(ca, req, time.Now())
		if err != nil {
			return failure("issuing the client certificate of %s: %v", name, err)
		}
		keyPEM, err := pemfile.MarshalPrivateKeyPEM(kp.Key)
		if err != nil {
			return failure("%v", err)
		}
		if err := atomicfile.Write(keyPath, keyPEM, 0o600); err != nil {
			return failure("%v", err)
		}
		if err := atomicfile.Write(certPath, tlspki.CertPEM(kp.Cert), 0o644); err != nil {
			return failure("%v", err)
		}
		writeClientsEntry(cmd.OutOrStdout(), identityOf(kp.Cert), admin)
		writeIssueSummary(cmd.ErrOrStderr(), dir, certPath, keyPath, req.algorithm, kp.Cert, ca.Cert, clamped)
		return nil
	}
	return cmd
}

// check validates the request (with DIR and the --identity text), each problem naming its
// flag, and parses the identity.
func (r *clientRequest) check(dir, identity string) error {
	switch {
	case dir == "":
		return fmt.Errorf("--dir: required: the folder 'pki init' wrote")
	case r.name == "":
		return fmt.Errorf("--client: required: the client's name, e.g. admin")
	case slices.Contains(reservedClientNames, r.name):
		return fmt.Errorf("--client %q: %s.crt is a file of 'pki init' (renew the server's and the watcher's certificates with 'pki renew')", r.name, r.name)
	case len(r.name) > 64:
		return fmt.Errorf("--client %q: longer than the 64 characters of a common name", r.name)
	}
	if p := k8svalidation.IsDNS1123Subdomain(r.name); len(p) > 0 {
		return fmt.Errorf("--client %q: %s (lower-case letters, digits, '-' and '.': it names the files)", r.name, strings.Join(p, "; "))
	}
	if identity != "" {
		u, err := tlspki.ParseIdentity(identity)
		if err != nil {
			return fmt.Errorf("--identity %q: %v", identity, err)
		}
		r.identity = u
	}
	if !slices.Contains(tlspki.Algorithms, r.algorithm) {
		return fmt.Errorf("--algorithm %q: want one of %s", r.algorithm, strings.Join(tlspki.Algorithms, ", "))
	}
	if r.validity < tlspki.MinValidity {
		return fmt.Errorf("--validity %s: below the %s minimum", duration.Format(r.validity), duration.Format(tlspki.MinValidity))
	}
	return nil
}

// readClientCA reads the client CA of the PKI folder dir and checks that its key is its
// certificate's and that it is a CA. The key file must be readable by its owner only.
func readClientCA(dir string) (*tlspki.KeyPair, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("reading the client CA: the PKI folder: %w", err)
	}
	cert, err := tlspki.ReadCertificate(filepath.Join(dir, tlspki.ClientCACert))
	if err != nil {
		return nil, fmt.Errorf("reading the client CA: %w", err)
	}
	key, err := pemfile.Open(filepath.Join(dir, tlspki.ClientCAKey), pemfile.Options{})
	if err != nil {
		return nil, fmt.Errorf("reading the client CA: %w", err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("reading the client CA: %s is not the key of %s", tlspki.ClientCAKey, tlspki.ClientCACert)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("reading the client CA: %s is not a CA certificate", filepath.Join(dir, tlspki.ClientCACert))
	}
	return &tlspki.KeyPair{Cert: cert, Key: key.Signer}, nil
}

// issueClient signs a client certificate as pki init signs the watcher's: a new key of
// req.algorithm, a random 128-bit serial, subject and authority key identifiers, NotBefore
// five minutes back, client auth only, common name req.name and req.identity as the only URI
// SAN; valid for req.validity but never past the CA (clamped then). The result is checked
// against the CA.
func issueClient(ca *tlspki.KeyPair, req clientRequest, now time.Time) (kp *tlspki.KeyPair, clamped bool, err error) {
	key, err := newClientKey(req.algorithm)
	if err != nil {
		return nil, false, err
	}
	notAfter := now.Add(req.validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter, clamped = ca.Cert.NotAfter, true
	}
	if !notAfter.After(now) {
		return nil, false, fmt.Errorf("the client CA %q expired at %s", ca.Cert.Subject.CommonName, stamp(ca.Cert.NotAfter))
	}
	serial, err := newClientSerial()
	if err != nil {
		return nil, false, err
	}
	skid, err := subjectKeyID(key.Public())
	if err != nil {
		return nil, false, err
	}
	usage := x509.KeyUsageDigitalSignature
	if _, ok := key.(*rsa.PrivateKey); ok {
		usage |= x509.KeyUsageKeyEncipherment // TLS 1.2 RSA key exchange, as pki init
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.name},
		NotBefore:             now.Add(-5 * time.Minute).UTC().Truncate(time.Second),
		NotAfter:              notAfter.UTC().Truncate(time.Second),
		KeyUsage:              usage,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		SubjectKeyId:          skid,
		AuthorityKeyId:        ca.Cert.SubjectKeyId,
	}
	if req.identity != nil {
		tmpl.URIs = []*url.URL{req.identity}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, false, fmt.Errorf("signing: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, false, fmt.Errorf("parsing the signed certificate: %w", err)
	}
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
		return nil, false, fmt.Errorf("checking the signed certificate: %w", err)
	}
	return &tlspki.KeyPair{Cert: cert, Key: key}, clamped, nil
}

// newClientSerial is a random positive serial number below 2^128, as pki init's.
func newClientSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("generating serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// newClientKey generates a key of alg, one of tlspki.Algorithms.
func newClientKey(alg string) (crypto.Signer, error) {
	var (
		key crypto.Signer
		err error
	)
	switch alg {
	case keyerr.P256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case keyerr.P384:
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case keyerr.RSA2048, keyerr.RSA3072, keyerr.RSA4096:
		bits := map[string]int{keyerr.RSA2048: 2048, keyerr.RSA3072: 3072, keyerr.RSA4096: 4096}[alg]
		key, err = rsa.GenerateKey(rand.Reader, bits)
	default:
		return nil, fmt.Errorf("unknown algorithm %q (want one of %s)", alg, strings.Join(tlspki.Algorithms, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("generating %s key: %w", alg, err)
	}
	return key, nil
}

// subjectKeyID is the subject key identifier of pub as pki init makes it (RFC 7093 method
// 1): the leftmost 160 bits of the SHA-256 hash of the subjectPublicKey bit string.
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encoding public key: %w", err)
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, fmt.Errorf("decoding public key: %w", err)
	}
	sum := sha256.Sum256(spki.PublicKey.Bytes)
	return sum[:20], nil
}

// writeClientsEntry prints the server config's clients entry for identity, with admin: true
// when admin.
func writeClientsEntry(w io.Writer, identity string, admin bool) {
	fmt.Fprintf(w, `# Add to the server config (signet-server reads it at start):
clients:
  - identity: %q
    signers: ["*"]    # or the names of the signers it may use
`, identity)
	if admin {
		fmt.Fprintln(w, "    admin: true       # may rotate those signers' CAs: signetctl ca stage / activate / retire / status")
	}
}

// writeIssueSummary tells, on w, what pki issue made and how to call the server with it. It
// prints no key.
func writeIssueSummary(w io.Writer, dir, certPath, keyPath, alg string, cert, ca *x509.Certificate, clamped bool) {
	fmt.Fprintf(w, "Issued a client certificate from %s (%s key):\n", filepath.Join(dir, tlspki.ClientCACert), alg)
	fmt.Fprintf(w, "  %-32s client auth, identity %s, serial %x, until %s\n", certPath+", "+filepath.Base(keyPath), identityOf(cert), cert.SerialNumber, stamp(cert.NotAfter))
	if clamped {
		fmt.Fprintf(w, "warning: cut short to the expiry of the client CA %q (%s): make a new PKI before then.\n", ca.Subject.CommonName, stamp(ca.NotAfter))
	}
	fmt.Fprintf(w, `The server accepts it once its config lists that identity (the entry on standard output).
Call the server with it, e.g.:
  signetctl signers --server SERVER:8443 --tls-ca %s --tls-cert %s --tls-key %s
`, filepath.Join(dir, tlspki.ServerCACert), certPath, keyPath)
}
