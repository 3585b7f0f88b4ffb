package main

import (
	"crypto/x509"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/signet-pki/signet/internal/tlspki"
)

// serverTLSDir is where deploy/server/server.yaml keeps the server's TLS files.
const serverTLSDir = "/etc/signet/tls"

// writeInitSummary tells, on w, what pki init made and which file goes where: the server
// config's tls and clients entries, the Secret, the watcher's config. It prints no key.
func writeInitSummary(w io.Writer, dir, secretFile string, opts tlspki.Options, pki *tlspki.PKI) {
	p := func(name string) string { return filepath.Join(dir, name) }
	identity := pki.Watcher.Cert.URIs[0].String()
	ref := pki.Record.WatcherSecret
	fmt.Fprintf(w, "Made the Signet TLS PKI in %s (%s keys):\n", dir, opts.Algorithm)
	fmt.Fprintf(w, "  %-32s server CA until %s: signs server.crt; the watcher's ca.crt\n", tlspki.ServerCACert+", "+tlspki.ServerCAKey, day(pki.ServerCA.Cert.NotAfter))
	fmt.Fprintf(w, "  %-32s client CA until %s: signs watcher.crt; the server's tls.clientCAFile\n", tlspki.ClientCACert+", "+tlspki.ClientCAKey, day(pki.ClientCA.Cert.NotAfter))
	fmt.Fprintf(w, "  %-32s the server until %s: %s\n", tlspki.ServerCert+", "+tlspki.ServerKey, day(pki.Server.Cert.NotAfter), sanList(pki.Server.Cert))
	fmt.Fprintf(w, "  %-32s the watcher until %s: identity %s\n", tlspki.WatcherCert+", "+tlspki.WatcherKey, day(pki.Watcher.Cert.NotAfter), identity)
	fmt.Fprintf(w, `
On the signing host, after copying %[2]s, %[4]s and %[3]s there (the key only for signet):
  install -d -m 0750 -o root -g signet %[1]s
  install -m 0644 %[2]s %[3]s %[1]s/
  install -m 0600 -o signet -g signet %[4]s %[1]s/
and in the server config (as deploy/server/server.yaml):
  tls:
    certFile: %[1]s/%[2]s
    keyFile: %[1]s/%[4]s
    clientCAFile: %[1]s/%[3]s
  clients:
    - identity: %[5]s
      signers: ["*"]    # or the watcher's signer names
`, serverTLSDir, tlspki.ServerCert, tlspki.ClientCACert, tlspki.ServerKey, identity)
	fmt.Fprintf(w, "\nIn the cluster: the Secret %s/%s (%s; it holds the watcher's private key)\n", ref.Namespace, ref.Name, secretWhere(secretFile))
	if secretFile != "" {
		fmt.Fprintf(w, "  kubectl apply --server-side -f %s\n", secretFile)
	}
	fmt.Fprintf(w, "and in the watcher's config.yaml: server.address %s:8443 (the port of the server's grpc.address), clusterName %s.\n",
		pki.Server.Cert.DNSNames[0], pki.Record.Cluster)
	fmt.Fprintf(w, `
Keep %s and %s off the signing host and out of the cluster: renewals need them.
Renew both certificates before %s (the expiry alerts fire 14 days ahead):
  signetctl pki renew --dir %s --watcher   (and --server)
`, p(tlspki.ServerCAKey), p(tlspki.ClientCAKey), day(earliest(pki.Server.Cert, pki.Watcher.Cert)), dir)
}

// writeRenewSummary tells, on w, what pki renew replaced and what to do next.
func writeRenewSummary(w io.Writer, dir, secretFile string, leaf tlspki.Leaf, r *tlspki.Renewal) {
	what, names := "the watcher's client certificate", fmt.Sprintf("identity %s", identityOf(r.New.Cert))
	certFile, keyFile := tlspki.WatcherCert, tlspki.WatcherKey
	if leaf == tlspki.Server {
		what, names = "the server's certificate", sanList(r.New.Cert)
		certFile, keyFile = tlspki.ServerCert, tlspki.ServerKey
	}
	fmt.Fprintf(w, "Renewed %s (%s): serial %x, valid until %s, replacing serial %x (until %s); new key in %s.\n",
		what, names, r.New.Cert.SerialNumber, stamp(r.New.Cert.NotAfter), r.Old.SerialNumber, stamp(r.Old.NotAfter), filepath.Join(dir, keyFile))
	if r.Clamped {
		fmt.Fprintf(w, "warning: cut short to the expiry of its CA %q (%s): make a new CA before then (signetctl pki init in a new folder, both CAs in the trust bundles during the change).\n",
			r.CA.Cert.Subject.CommonName, stamp(r.CA.Cert.NotAfter))
	}
	if leaf == tlspki.Server {
		fmt.Fprintf(w, `On the signing host, replace the key first, then the certificate; the server re-reads them
within its reloadInterval (10s by default) and new connections get the new certificate:
  install -m 0600 -o signet -g signet %s %s/
  install -m 0644 %s %s/
`, filepath.Join(dir, keyFile), serverTLSDir, filepath.Join(dir, certFile), serverTLSDir)
		return
	}
	fmt.Fprintf(w, "Apply the Secret (%s; it holds the watcher's private key)", secretWhere(secretFile))
	if secretFile != "" {
		fmt.Fprintf(w, ":\n  kubectl apply --server-side -f %s\n", secretFile)
	} else {
		fmt.Fprintln(w, ".")
	}
	fmt.Fprintln(w, "The kubelet updates the mounted files, the watcher presents the new certificate from its next connection; no restart.")
}

// secretWhere says where the Secret manifest went.
func secretWhere(secretFile string) string {
	if secretFile == "" {
		return "printed on standard output"
	}
	return "written to " + secretFile
}

// sanList lists a certificate's DNS and IP SANs: "DNS a, b; IP 10.0.0.5".
func sanList(cert *x509.Certificate) string {
	var parts []string
	if len(cert.DNSNames) > 0 {
		parts = append(parts, "DNS "+strings.Join(cert.DNSNames, ", "))
	}
	if len(cert.IPAddresses) > 0 {
		ips := make([]string, len(cert.IPAddresses))
		for i, ip := range cert.IPAddresses {
			ips[i] = ip.String()
		}
		parts = append(parts, "IP "+strings.Join(ips, ", "))
	}
	return strings.Join(parts, "; ")
}

// identityOf is the client identity the server reads from cert: its first URI SAN, else its
// common name (as server/access.Identity).
func identityOf(cert *x509.Certificate) string {
	if len(cert.URIs) > 0 {
		return cert.URIs[0].String()
	}
	return cert.Subject.CommonName
}

// earliest is the earlier NotAfter of a and b.
func earliest(a, b *x509.Certificate) time.Time {
	if a.NotAfter.Before(b.NotAfter) {
		return a.NotAfter
	}
	return b.NotAfter
}

// day formats t as a UTC date.
func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// stamp formats t in UTC, RFC 3339.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
