package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/objectrequest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// explainCommand is "signetctl explain": a dry run of a request against a signer.
func explainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain (FILE.pem | - | CSR_NAME | --csr CSR_NAME)",
		Short: "Dry-run a CSR (PEM file or cluster object) against a signer and show every rule",
		Long: `Runs a certificate request through the signer's checks without signing anything and prints
every rule ("✓ rule" or "✗ rule — detail") and the verdict. The request is either a PEM PKCS#10
file ("-" reads stdin) with its parameters given as flags, or a certificates.k8s.io/v1
CertificateSigningRequest read from the cluster (--kubeconfig or --csr), which supplies the
signer, request, usages, expirationSeconds and requester.

Exit 0 when the request would be signed, 1 when it would be refused (or the server refuses the
call, e.g. an unknown signer), 2 on a usage error or no answer.

` + exitCodesHelp,
		Example: `  signetctl explain --signer example.com/serving --usages "digital signature,server auth" \
      --username system:node:worker-1 --groups system:nodes csr.pem
  openssl req -new -key k.pem -subj /CN=alice | signetctl explain --signer signet.dev/dev -
  signetctl explain --kubeconfig ~/.kube/config csr-abc12`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError(cmd, "one argument expected, got %d: %s", len(args), strings.Join(args, " "))
			}
			return nil
		},
	}
	conn := addConnFlags(cmd)
	out := addOutputFlag(cmd, "the ExplainCertificateSigningRequest response")
	var o explainOptions
	fs := cmd.Flags()
	fs.StringVar(&o.signer, "signer", "", "signer `name` (file mode), e.g. signet.dev/dev")
	fs.StringVar(&o.usages, "usages", "", "comma-separated certificates.k8s.io `usages` (file mode), e.g. \"digital signature,client auth\"")
	fs.IntVar(&o.expiration, "expiration-seconds", 0, "requested lifetime in `seconds` (file mode); 0 asks for the signer's maximum")
	fs.StringVar(&o.username, "username", "", "requester `username` as the apiserver would record it (file mode)")
	fs.StringVar(&o.uid, "uid", "", "requester `uid` (file mode)")
	fs.StringVar(&o.groups, "groups", "", "comma-separated requester `groups` (file mode)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig `path`: read the CertificateSigningRequest from the cluster")
	fs.StringVar(&o.kubeCtx, "context", "", "kubeconfig `context` (cluster mode; default: the current context)")
	fs.StringVar(&o.csrName, "csr", "", "CertificateSigningRequest `name` to read from the cluster (default kubeconfig if --kubeconfig is not given)")
	_ = cmd.MarkFlagFilename("kubeconfig")
	_ = cmd.RegisterFlagCompletionFunc("signer", completeSigners(conn))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		req, err := o.request(cmd, conn, args)
		if err != nil {
			return err
		}
		cc, err := conn.dial()
		if err != nil {
			return err
		}
		defer cc.Close()
		callCtx, cancel := conn.callContext(cmd.Context())
		defer cancel()
		resp, err := signetv1.NewSignerServiceClient(cc).ExplainCertificateSigningRequest(callCtx, &signetv1.ExplainCertificateSigningRequestRequest{Request: req})
		if err != nil {
			return conn.callError(err)
		}
		w := cmd.OutOrStdout()
		if out.text() {
			writeExplanation(w, req, resp, terminalWidth(w))
		} else if err := out.print(w, resp); err != nil {
			return err
		}
		if !resp.GetAllowed() {
			return silentFailure()
		}
		return nil
	}
	return cmd
}

// explainOptions are the flags of explain that describe the request.
type explainOptions struct {
	signer, usages, username, uid, groups string
	expiration                            int
	kubeconfig, kubeCtx, csrName          string
}

// request checks the flags and builds the request: from the cluster's
// CertificateSigningRequest (cluster mode), or from the PEM file and the flags.
func (o *explainOptions) request(cmd *cobra.Command, conn *connFlags, pos []string) (*signetv1.SignCertificateSigningRequestRequest, error) {
	set := cmd.Flags().Changed
	if set("kubeconfig") || set("csr") {
		for _, name := range []string{"signer", "usages", "expiration-seconds", "username", "uid", "groups"} {
			if set(name) {
				return nil, usageError(cmd, "--%s cannot be combined with --kubeconfig/--csr: the CertificateSigningRequest supplies it", name)
			}
		}
		switch {
		case o.csrName != "" && len(pos) == 1:
			return nil, usageError(cmd, "give the CSR name once: --csr %s or the argument %s", o.csrName, pos[0])
		case len(pos) == 1:
			o.csrName = pos[0]
		case o.csrName == "":
			return nil, usageError(cmd, "missing the CertificateSigningRequest name")
		}
		if err := conn.resolve(); err != nil {
			return nil, err
		}
		csr, err := readClusterCSR(cmd.Context(), o.kubeconfig, o.kubeCtx, o.csrName, conn)
		if err != nil {
			return nil, inputError("%v", err)
		}
		return objectrequest.CSR(csr), nil // what the watcher would forward
	}
	switch {
	case set("context"):
		return nil, usageError(cmd, "--context needs --kubeconfig or --csr")
	case len(pos) == 0:
		return nil, usageError(cmd, "missing the PEM CSR file (or - for stdin), or --kubeconfig PATH CSR_NAME")
	case o.signer == "":
		return nil, usageError(cmd, "missing --signer (a PEM file carries no signer name)")
	case o.expiration < 0 || int64(o.expiration) > int64(^uint32(0)>>1):
		return nil, usageError(cmd, "--expiration-seconds %d is out of range", o.expiration)
	}
	if err := conn.resolve(); err != nil {
		return nil, err
	}
	data, err := readPEMArg(pos[0], cmd.InOrStdin())
	if err != nil {
		return nil, inputError("%v", err)
	}
	req := &signetv1.SignCertificateSigningRequestRequest{
		SignerName: o.signer,
		Request:    data,
		Usages:     splitList(o.usages),
		Requester: &signetv1.Requester{
			Username: o.username,
			Uid:      o.uid,
			Groups:   splitList(o.groups),
		},
	}
	if o.expiration > 0 {
		v := int32(o.expiration)
		req.ExpirationSeconds = &v
	}
	return req, nil
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
func readClusterCSR(ctx context.Context, path, kubeCtx, name string, conn *connFlags) (*certificatesv1.CertificateSigningRequest, error) {
	cs, err := kubeClient(path, kubeCtx)
	if err != nil {
		return nil, err
	}
	getCtx, cancel := conn.callContext(ctx)
	defer cancel()
	csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(getCtx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading CertificateSigningRequest %s: %w", name, err)
	}
	return csr, nil
}
