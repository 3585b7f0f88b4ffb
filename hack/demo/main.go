// Command demo runs Signet end to end on this machine: a real kube-apiserver and etcd,
// `signet-server --dev` and `signet-watcher` as separate processes, and one CSR that a
// requester submits, an admin approves and Signet signs. It prints the issued chain, verifies
// it against the signer's CA and shuts everything down. `make demo` runs it.
//
// --keep (`make demo KEEP=1`) leaves it all running instead: the demo goes on in the
// background, in a folder it prints with how to reach each piece (kubectl, signetctl, the
// metrics) and how to stop it (keep.go).
//
// --key chooses where the signer's CA key lives: file (the PEM file `signet-server --dev`
// writes), pkcs11 (made inside a fresh SoftHSM2 token) or tpm (made inside a TPM 2.0: swtpm,
// started as a separate process). For pkcs11 and tpm the demo prepares the dev PKI itself,
// generates the key inside the device, makes the signer's root with it and runs signet-server
// on that configuration; everything after is the same. `make demo KEY=pkcs11` runs it.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/signet-pki/signet/internal/certinfo"
	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/filereload"
)

const (
	signerName = "signet.dev/demo"
	requester  = "alice"
)

func main() {
	bin := flag.String("bin", "bin", "folder holding signet-server and signet-watcher")
	version := flag.String("kube-version", "v1.37.1", "kube-apiserver version (hack/kube/<version>)")
	keep := flag.Bool("keep", false, "leave the control plane, signet-server and signet-watcher running in the background after the demo, and print where everything is and how to stop it")
	keepDir := flag.String("keep-dir", "", "internal: the folder of the background copy --keep starts")
	key := flag.String("key", keyFile, "where the signer's CA key lives: file, pkcs11 (SoftHSM2) or tpm (swtpm)")
	flag.Parse()
	switch *key {
	case keyFile, keyPKCS11, keyTPM:
	default:
		fmt.Fprintf(os.Stderr, "demo: unknown --key %q: want %s, %s or %s\n", *key, keyFile, keyPKCS11, keyTPM)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *keepDir != "": // the background copy of --keep
		err = run(ctx, *bin, *version, *key, &kept{dir: *keepDir, ready: readyPipe()})
		_ = os.Remove(filepath.Join(*keepDir, pidFile)) // last: the stop script waits for it
	case *keep:
		err = detach(ctx, os.Args[1:])
	default:
		err = run(ctx, *bin, *version, *key, nil)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "\ndemo failed:", err)
		os.Exit(1)
	}
}

// run runs the demo in a new temporary folder that it removes at the end; with keep (the
// background copy of --keep) it runs in keep.dir, stays up until ctx ends and keeps the folder.
func run(ctx context.Context, bin, version, keyKind string, keep *kept) error {
	start := time.Now()
	var dir string
	if keep == nil {
		var err error
		if dir, err = os.MkdirTemp("", "signet-demo-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else {
		dir = keep.dir
		defer fmt.Printf("\n==> stopped; the folder stays: %s (rm -rf it when done)\n", dir)
	}

	step("starting kube-apiserver and etcd %s", version)
	cluster, err := controlplane.Start(ctx, controlplane.Options{Version: version})
	if err != nil {
		return err
	}
	defer func() { step("stopping the control plane"); _ = cluster.Stop() }()
	done("control plane up in %s", time.Since(start).Round(time.Millisecond))

	addr, err := freeAddress()
	if err != nil {
		return err
	}
	serverHTTP, err := freeAddress()
	if err != nil {
		return err
	}
	state := filepath.Join(dir, "server")
	server, caKey, err := startServer(ctx, bin, dir, state, keyKind, addr, serverHTTP)
	if err != nil {
		return err
	}
	defer caKey.cleanup() // after the server has stopped (defers run last in, first out)
	defer server.stop()
	done("signet-server is serving %s", signerName)

	watcherUser, err := cluster.AddWatcher("signet-watcher", []string{signerName})
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "watcher.kubeconfig")
	if err := cluster.WriteKubeconfig(watcherUser, kubeconfig); err != nil {
		return err
	}
	metricsAddr, err := freeAddress()
	if err != nil {
		return err
	}
	step("starting signet-watcher as user signet-watcher (least-privilege RBAC: sign and attest %s only)", signerName)
	watcher, err := startBinary(ctx, dir, filepath.Join(bin, "signet-watcher"),
		"--kubeconfig", kubeconfig, "--signer-name", signerName, "--server", addr,
		"--leader-elect=false", "--metrics-address", metricsAddr, // one replica here; deploy/ runs two with leader election
		"--tls-ca", filepath.Join(state, devpki.TLSCACert),
		"--tls-cert", filepath.Join(state, devpki.ClientCert),
		"--tls-key", filepath.Join(state, devpki.ClientKey))
	if err != nil {
		return err
	}
	defer watcher.stop()

	alice, err := cluster.AddRequester(requester, []string{"demo:app-owners"})
	if err != nil {
		return err
	}
	csr, err := submitCSR(ctx, alice)
	if err != nil {
		return err
	}
	done("%s submitted CSR %s (spec.username=%s)", requester, csr.Name, csr.Spec.Username)

	step("approving %s as cluster-admin (kubectl certificate approve)", csr.Name)
	approved := time.Now()
	if err := cluster.Approve(ctx, csr.Name); err != nil {
		return err
	}
	chain, err := waitForCertificate(ctx, alice, csr.Name, watcher.exited)
	if err != nil {
		return fmt.Errorf("%w\nwatcher log:\n%s\nserver log:\n%s", err, watcher.logTail(), server.logTail())
	}
	done("certificate written to status %s after approval", time.Since(approved).Round(time.Millisecond))

	certs, err := parseChain(chain)
	if err != nil {
		return err
	}
	fmt.Println("\nIssued chain (leaf first):")
	for i, c := range certs {
		fmt.Printf("  [%d]\n", i)
		certinfo.Write(os.Stdout, c, "      ")
	}
	if err := verify(certs, filepath.Join(state, devpki.SignerCACert)); err != nil {
		return err
	}
	done("chain verifies against the signer CA %s%s", filepath.Join(state, devpki.SignerCACert), caKey.rootNote())
	if err := showTrustBundle(ctx, cluster, signerName, certs); err != nil {
		return fmt.Errorf("%w\nwatcher log:\n%s", err, watcher.logTail())
	}
	showEvents(ctx, cluster, csr.Name)
	showMetrics(metricsAddr)
	showKeyMetrics(serverHTTP)
	fmt.Printf("\nCA key: %s\n", caKey.summary())
	fmt.Printf("\nDemo finished in %s.\n", time.Since(start).Round(100*time.Millisecond))
	if keep == nil {
		return nil
	}
	adminConfig, _ := cluster.Admin()
	return stayUp(ctx, keptDemo{
		dir: dir, state: state, bin: absPath(bin), grpcAddr: addr, serverHTTP: serverHTTP,
		watcherMetrics: metricsAddr, apiserver: adminConfig.Host, csrName: csr.Name,
		keySummary: caKey.summary(),
	}, keep.ready, func(path string) error { return cluster.WriteKubeconfig(nil, path) })
}

// absPath is path made absolute, for the commands the kept demo prints; path itself if that
// fails.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// startServer starts signet-server with its CA key where keyKind says and waits until it is
// healthy. A file key is plain `signet-server --dev`; a pkcs11 or tpm key is made in the
// device first and the server runs on the configuration that names it.
func startServer(ctx context.Context, bin, dir, state, keyKind, addr, httpAddr string) (*process, *caKey, error) {
	ck := fileKey(state)
	if err := prepareDevState(state, addr); err != nil {
		return nil, nil, err
	}
	args := []string{"--dev", "--dev-state-dir", state, "--dev-signer-name", signerName}
	if keyKind != keyFile {
		step("generating the signer's CA key (P-256) inside a %s, and its root certificate", deviceName(keyKind))
		var err error
		if ck, err = deviceKey(ctx, keyKind, dir, state, addr); err != nil {
			return nil, nil, err
		}
		done("CA key %s", ck.place)
		args = []string{"--config", filepath.Join(state, devpki.ConfigFile)}
	}
	step("starting signet-server %s on %s (state in %s)", args[0], addr, state)
	server, err := startBinary(ctx, dir, filepath.Join(bin, "signet-server"), append(args, "--listen", addr, "--http-listen", httpAddr)...)
	if err != nil {
		ck.cleanup()
		return nil, nil, err
	}
	if err := waitHealthy(ctx, addr, state); err != nil {
		server.stop()
		ck.cleanup()
		return nil, nil, fmt.Errorf("%w\n%s", err, server.logTail())
	}
	return server, ck, nil
}

// deviceName names the device of a --key kind.
func deviceName(keyKind string) string {
	if keyKind == keyTPM {
		return "TPM 2.0 (swtpm)"
	}
	return "SoftHSM2 token"
}

func submitCSR(ctx context.Context, u *controlplane.User) (*certificatesv1.CertificateSigningRequest, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "payments.demo.svc", Organization: []string{"demo"}},
		DNSNames: []string{"payments.demo.svc", "payments.demo.svc.cluster.local"},
	}, key)
	if err != nil {
		return nil, err
	}
	expiration := int32(3600)
	return u.Client().CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "demo-payments-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        signerName,
			ExpirationSeconds: &expiration,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}, metav1.CreateOptions{})
}

func waitForCertificate(ctx context.Context, u *controlplane.User, name string, watcherExited <-chan struct{}) ([]byte, error) {
	var chain []byte
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-watcherExited:
			return false, fmt.Errorf("signet-watcher exited")
		default:
		}
		csr, err := u.Client().CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateFailed {
				return false, fmt.Errorf("CSR %s failed: %s: %s", name, c.Reason, c.Message)
			}
		}
		chain = csr.Status.Certificate
		return len(chain) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the certificate of %s: %w", name, err)
	}
	return chain, nil
}

func parseChain(data []byte) ([]*x509.Certificate, error) {
	certs, err := filereload.ParseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("status.certificate: %w", err)
	}
	return certs, nil
}

func verify(chain []*x509.Certificate, caFile string) error {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data) {
		return fmt.Errorf("no CA certificate in %s", caFile)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err = chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return fmt.Errorf("verifying the issued chain: %w", err)
	}
	return nil
}

func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }
func done(format string, args ...any) { fmt.Printf("    ✓ "+format+"\n", args...) }
