package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/signerclient"
)

// explainCommand is "signetctl explain": a dry run of a request against a signer.
func explainCommand() command {
	return command{name: "explain", summary: "dry-run a CSR (PEM file or cluster object) against a signer and show every rule", run: runExplain}
}

const explainUsage = `Usage:
  signetctl explain --signer NAME [--usages "digital signature,client auth"] [--expiration-seconds N]
                    [--username U] [--uid UID] [--groups g1,g2] [connection flags] FILE.pem|-
  signetctl explain [--kubeconfig PATH] [--context NAME] [connection flags] CSR_NAME
  signetctl explain [--kubeconfig PATH] --csr CSR_NAME [connection flags]

Runs a certificate request through the signer's checks without signing anything and prints
every rule ("✓ rule" or "✗ rule — detail") and the verdict. The request is either a PEM PKCS#10
file ("-" reads stdin) with its parameters given as flags, or a certificates.k8s.io/v1
CertificateSigningRequest read from the cluster, which supplies the signer, request, usages,
expirationSeconds and requester.

Exit codes: 0 the request would be signed, 1 it would be refused, 2 usage or connection error.

Flags:`

// runExplain calls ExplainCertificateSigningRequest: exit 0 allowed, 1 refused, 2 usage or
// connection error.
func runExplain(ctx context.Context, s streams, args []string) int {
	const prog = "signetctl explain"
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(s.err)
	var conn connFlags
	conn.register(fs)
	var (
		signer     = fs.String("signer", "", "signer `name` (file mode), e.g. signet.dev/dev")
		usages     = fs.String("usages", "", "comma-separated certificates.k8s.io `usages` (file mode), e.g. \"digital signature,client auth\"")
		expiration = fs.Int("expiration-seconds", 0, "requested lifetime in `seconds` (file mode); 0 asks for the signer's maximum")
		username   = fs.String("username", "", "requester `username` as the apiserver would record it (file mode)")
		uid        = fs.String("uid", "", "requester `uid` (file mode)")
		groups     = fs.String("groups", "", "comma-separated requester `groups` (file mode)")
		kubeconfig = fs.String("kubeconfig", "", "kubeconfig `path`: read the CertificateSigningRequest from the cluster")
		kubeCtx    = fs.String("context", "", "kubeconfig `context` (cluster mode; default: the current context)")
		csrName    = fs.String("csr", "", "CertificateSigningRequest `name` to read from the cluster (default kubeconfig if --kubeconfig is not given)")
		output     = fs.String("output", "text", "`format`: text, or json (the response as protojson)")
	)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), explainUsage)
		fs.PrintDefaults()
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(s.err, "%s: %s\n", prog, fmt.Sprintf(format, a...))
		fmt.Fprintf(s.err, "Run 'signetctl explain -h' for usage.\n")
		return 2
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := outputFormat(*output); err != nil {
		return usageErr("%v", err)
	}
	clusterMode := set["kubeconfig"] || set["csr"]
	if len(pos) > 1 {
		return usageErr("one argument expected, got %d: %s", len(pos), strings.Join(pos, " "))
	}
	if clusterMode {
		for _, name := range []string{"signer", "usages", "expiration-seconds", "username", "uid", "groups"} {
			if set[name] {
				return usageErr("--%s cannot be combined with --kubeconfig/--csr: the CertificateSigningRequest supplies it", name)
			}
		}
		switch {
		case *csrName != "" && len(pos) == 1:
			return usageErr("give the CSR name once: --csr %s or the argument %s", *csrName, pos[0])
		case len(pos) == 1:
			*csrName = pos[0]
		case *csrName == "":
			return usageErr("missing the CertificateSigningRequest name")
		}
	} else {
		if set["context"] {
			return usageErr("--context needs --kubeconfig or --csr")
		}
		if len(pos) == 0 {
			return usageErr("missing the PEM CSR file (or - for stdin), or --kubeconfig PATH CSR_NAME")
		}
		if *signer == "" {
			return usageErr("missing --signer (a PEM file carries no signer name)")
		}
		if *expiration < 0 || int64(*expiration) > int64(^uint32(0)>>1) {
			return usageErr("--expiration-seconds %d is out of range", *expiration)
		}
	}
	if err := conn.resolve(); err != nil {
		return usageErr("%v", err)
	}

	var req *signetv1.SignCertificateSigningRequestRequest
	if clusterMode {
		csr, err := readClusterCSR(ctx, *kubeconfig, *kubeCtx, *csrName, conn)
		if err != nil {
			fmt.Fprintf(s.err, "%s: %v\n", prog, err)
			return 2
		}
		req = signerclient.BuildRequest(csr) // what the watcher would forward
	} else {
		data, err := readPEMArg(pos[0], os.Stdin)
		if err != nil {
			fmt.Fprintf(s.err, "%s: %v\n", prog, err)
			return 2
		}
		req = &signetv1.SignCertificateSigningRequestRequest{
			SignerName: *signer,
			Request:    data,
			Usages:     splitList(*usages),
			Requester: &signetv1.Requester{
				Username: *username,
				Uid:      *uid,
				Groups:   splitList(*groups),
			},
		}
		if *expiration > 0 {
			v := int32(*expiration)
			req.ExpirationSeconds = &v
		}
	}

	client, closer, err := conn.dial()
	if err != nil {
		fmt.Fprintf(s.err, "%s: %v\n", prog, err)
		return 2
	}
	defer closer.Close()
	callCtx, cancel := conn.callContext(ctx)
	defer cancel()
	resp, err := client.ExplainCertificateSigningRequest(callCtx, &signetv1.ExplainCertificateSigningRequestRequest{Request: req})
	if err != nil {
		fmt.Fprintf(s.err, "%s: %s\n", prog, describeRPCError(conn.server, err))
		return 2
	}
	if *output == "json" {
		if err := writeJSON(s.out, resp); err != nil {
			fmt.Fprintf(s.err, "%s: %v\n", prog, err)
			return 2
		}
	} else {
		writeExplanation(s.out, req, resp, terminalWidth(s.out))
	}
	if resp.GetAllowed() {
		return 0
	}
	return 1
}

// writeExplanation prints the rules and the verdict of resp.
func writeExplanation(w io.Writer, req *signetv1.SignCertificateSigningRequestRequest, resp *signetv1.ExplainCertificateSigningRequestResponse, width int) {
	head := "signer " + req.GetSignerName()
	if u := req.GetUsages(); len(u) > 0 {
		head += ", usages: " + strings.Join(u, ", ")
	}
	if req.ExpirationSeconds != nil {
		head += fmt.Sprintf(", expirationSeconds: %d", req.GetExpirationSeconds())
	}
	if name := req.GetObject().GetName(); name != "" {
		head = "CertificateSigningRequest " + name + ", " + head
	}
	writeWrapped(w, "", head, 0, width)
	for _, r := range resp.GetRules() {
		if r.GetPassed() {
			writeWrapped(w, "✓ ", r.GetRule(), 2, width)
			continue
		}
		text := r.GetRule()
		if d := r.GetDetail(); d != "" {
			text += " — " + d
		}
		writeWrapped(w, "✗ ", text, 2, width)
	}
	if resp.GetAllowed() {
		fmt.Fprintf(w, "would be signed, lifetime %s\n", resp.GetLifetime().AsDuration())
		return
	}
	writeWrapped(w, "", fmt.Sprintf("would be refused: %s: %s", resp.GetReason(), resp.GetMessage()), 2, width)
}

// readPEMArg reads the CSR file name, or stdin for "-", and checks it looks like PEM.
func readPEMArg(name string, stdin io.Reader) ([]byte, error) {
	var (
		data []byte
		err  error
	)
	if name == "-" {
		data, err = io.ReadAll(stdin)
		name = "stdin"
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the CSR: %w", err)
	}
	if !strings.Contains(string(data), "-----BEGIN ") {
		return nil, fmt.Errorf("%s holds no PEM block; expected a PEM \"CERTIFICATE REQUEST\"", name)
	}
	return data, nil
}

// splitList splits a comma-separated flag value, trimming spaces and dropping empty items.
func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// readClusterCSR gets the named CertificateSigningRequest with the kubeconfig at path (the
// default loading rules when empty) and context kubeCtx (the current one when empty).
func readClusterCSR(ctx context.Context, path, kubeCtx, name string, conn connFlags) (*certificatesv1.CertificateSigningRequest, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeCtx}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	getCtx, cancel := conn.callContext(ctx)
	defer cancel()
	csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(getCtx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading CertificateSigningRequest %s: %w", name, err)
	}
	return csr, nil
}
