package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/internal/atomicfile"
	"github.com/signet-pki/signet/internal/duration"
	"github.com/signet-pki/signet/internal/tlspki"
	"github.com/signet-pki/signet/keystore/pemfile"
)

// pkiCommand is "signetctl pki": the TLS PKI between signet-server and signet-watcher.
func pkiCommand() *cobra.Command {
	return groupCommand("pki",
		"Make the TLS certificates of the server, the watcher and other clients, and renew them (init, issue, renew)",
		`Makes the mutual TLS PKI between signet-server and signet-watcher in a folder, offline, and renews
its certificates. Not the signers' CAs (those are 'signetctl keys' and 'signetctl ca').

Two CAs, each signing one kind of certificate:
  server CA  signs the server's certificate only; the watcher trusts it (its ca.crt)
  client CA  signs client certificates only; the server trusts it (tls.clientCAFile)
A CA that can mint client identities can therefore never mint a certificate the watcher takes
for the server, whatever it is later used for (more clients, or a Signet signer that renews the
watcher's certificate through Signet, docs/operations.md); and each CA rotates on its own.

Run it where the CA keys may live (an admin workstation, not the signing host nor the cluster):
the server gets server.crt, server.key and clients-ca.crt; the cluster gets the Secret. 'pki
issue' makes further client certificates (an operator's admin.crt, a webhook client's) from the
client CA.`,
		`  signetctl pki init --dir ./signet-pki --server-name signet.internal.example.com \
      --watcher-identity spiffe://prod.example.com/ns/signet-system/sa/signet-watcher --secret-file watcher-secret.yaml
  signetctl pki issue --dir ./signet-pki --client admin --admin
  signetctl pki renew --dir ./signet-pki --watcher | kubectl apply --server-side -f -`,
		pkiInitCommand(), pkiIssueCommand(), pkiRenewCommand())
}

// pkiInitLong is the help of pki init, before the exit codes.
const pkiInitLong = `Makes in DIR (created 0700) the TLS PKI of one signing server and its watcher:

  server-ca.crt, server-ca.key    the server CA (signs the server's certificate)
  clients-ca.crt, clients-ca.key  the client CA (signs client certificates)
  server.crt, server.key          the server's certificate: server auth, the --server-name and
                                  --server-ip SANs, the first name as common name
  watcher.crt, watcher.key        the watcher's client certificate: client auth, common name
                                  signet-watcher, --watcher-identity as its only URI SAN (the
                                  identity the server reads, for its clients[].identity)
  signet-pki.yaml                 the cluster and the Secret's name, for 'pki renew' (no secret)

Keys are new, written 0600 (certificates 0644); every file is written atomically. Existing
files are never replaced without --force. Certificates have random 128-bit serials, subject and
authority key identifiers, a NotBefore five minutes back for clock skew. Defaults: certificates
for 90 days (cert-manager's default; the expiry alerts warn 14 days ahead), CAs for ten years
(kubeadm's), P-256 keys.

It prints the manifest of the watcher's Secret (type kubernetes.io/tls: tls.crt, tls.key,
ca.crt = the server CA; what deploy/watcher mounts at /etc/signet/tls) on standard output, or
writes it (0600) to --secret-file. THE MANIFEST CONTAINS THE WATCHER'S PRIVATE KEY: pipe it to
kubectl or keep the file as carefully as the key. Which file goes where, with the server
config's tls and clients entries, is printed on standard error; nothing else secret is printed.`

// pkiInitCommand is "signetctl pki init".
func pkiInitCommand() *cobra.Command {
	var (
		opts       tlspki.Options
		dir        string
		secretFile string
		force      bool
	)
	opts.Validity, opts.CAValidity = tlspki.DefaultValidity, tlspki.DefaultCAValidity
	cmd := &cobra.Command{
		Use:   "init --dir DIR --server-name NAME[,NAME...] [--server-ip IP...] --watcher-identity URI [flags]",
		Short: "Make the TLS CAs, the server's certificate, the watcher's client certificate and its Secret",
		Long:  pkiInitLong + "\n\n" + exitCodesHelp,
		Example: `  signetctl pki init --dir ./signet-pki --server-name signet.internal.example.com --server-ip 10.0.0.5 \
      --watcher-identity spiffe://prod.example.com/ns/signet-system/sa/signet-watcher --cluster prod-eu-1 \
      --secret-file watcher-secret.yaml
  signetctl pki init --dir ./signet-pki --server-name signet-1.example.com,signet-2.example.com \
      --watcher-identity spiffe://prod.example.com/ns/signet-system/sa/signet-watcher | kubectl apply --server-side -f -`,
		Args: cobra.NoArgs,
	}
	flags := cmd.Flags()
	flags.StringVar(&dir, "dir", "", "the `folder` to write the PKI into (created with mode 0700)")
	flags.StringSliceVar(&opts.ServerNames, "server-name", nil, "the server's DNS `name`s (comma-separated or repeated): its certificate's SANs; the watcher's server.address uses one")
	flags.StringSliceVar(&opts.ServerIPs, "server-ip", nil, "IP `address`es the server certificate also holds (comma-separated or repeated)")
	flags.StringVar(&opts.WatcherIdentity, "watcher-identity", "", "the watcher's identity `URI`, exactly as the server's clients[].identity lists it")
	flags.StringVar(&opts.Cluster, "cluster", tlspki.DefaultCluster, "the watcher's clusterName (for the summary and renewals)")
	flags.Var(duration.Var(&opts.Validity), "validity", "lifetime of the server and client certificates: days (90d) or a Go duration (2160h)")
	flags.Var(duration.Var(&opts.CAValidity), "ca-validity", "lifetime of the two CAs: days (3650d) or a Go duration")
	flags.StringVar(&opts.Algorithm, "algorithm", tlspki.DefaultAlgorithm, "the algorithm of every key: "+strings.Join(tlspki.Algorithms, ", "))
	flags.StringVar(&opts.Namespace, "namespace", tlspki.DefaultNamespace, "the namespace of the watcher's Secret")
	flags.StringVar(&opts.SecretName, "secret-name", tlspki.DefaultSecretName, "the name of the watcher's Secret")
	flags.StringVar(&secretFile, "secret-file", "", "write the Secret manifest to this `file` (mode 0600) instead of standard output")
	flags.BoolVar(&force, "force", false, "replace existing files in DIR and --secret-file")
	pkiCompletions(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if dir == "" {
			return usageError(cmd, "--dir: required: the folder to write the PKI into")
		}
		opts.Algorithm = canonicalAlgorithm(opts.Algorithm)
		opts.Default()
		if err := opts.Validate(); err != nil {
			return usageError(cmd, "%s", strings.ReplaceAll(err.Error(), "\n", "\n  "))
		}
		if !force {
			if err := refuseOverwrite(dir, secretFile); err != nil {
				return err
			}
		}
		pki, err := tlspki.New(opts)
		if err != nil {
			return failure("%v", err)
		}
		if err := pki.Write(dir, force); err != nil {
			return failure("%v", err)
		}
		if info, err := os.Stat(dir); err == nil && info.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s is open to group or others (mode %#o): its keys are 0600, but consider chmod 700 %s\n", dir, info.Mode().Perm(), dir)
		}
		manifest, err := tlspki.WatcherSecret(pki.Record.WatcherSecret, pki.Watcher, pki.ServerCA.Cert)
		if err != nil {
			return failure("%v", err)
		}
		if err := writeSecret(cmd, secretFile, manifest); err != nil {
			return err
		}
		writeInitSummary(cmd.ErrOrStderr(), dir, secretFile, opts, pki)
		return nil
	}
	return cmd
}

// pkiRenewCommand is "signetctl pki renew".
func pkiRenewCommand() *cobra.Command {
	var (
		dir, secretFile string
		watcher, server bool
		validity        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "renew --dir DIR (--watcher | --server) [--validity 90d] [--secret-file FILE]",
		Short: "Issue the watcher's (or the server's) certificate again from its CA in DIR, with a new key",
		Long: `Issues the watcher's client certificate (--watcher) or the server's certificate (--server) again
from its CA in DIR (made by 'pki init'): a new key of the same algorithm, a new serial, the same
subject, SANs and so the same client identity, for the lifetime of the certificate it replaces
(or --validity), never past the CA's own expiry (a warning says when the CA cuts it short). The
key file, then the certificate file, are replaced atomically in DIR.

--watcher prints the new manifest of the watcher's Secret (it contains the watcher's PRIVATE
KEY) on standard output, or writes it (0600) to --secret-file; applying it renews the watcher
without a restart: the kubelet updates the mounted files, the watcher reads them within seconds
and presents the new certificate from its next connection to the server (docs/operations.md,
"Renewing the watcher's client certificate").
--server prints nothing on standard output: copy server.key, then server.crt, to the signing
host; the server re-reads them within its reloadInterval.

` + exitCodesHelp,
		Example: `  signetctl pki renew --dir ./signet-pki --watcher | kubectl apply --server-side -f -
  signetctl pki renew --dir ./signet-pki --watcher --secret-file watcher-secret.yaml
  signetctl pki renew --dir ./signet-pki --server --validity 180d`,
		Args: cobra.NoArgs,
	}
	flags := cmd.Flags()
	flags.StringVar(&dir, "dir", "", "the `folder` 'pki init' wrote")
	flags.BoolVar(&watcher, "watcher", false, "renew the watcher's client certificate (watcher.crt, watcher.key)")
	flags.BoolVar(&server, "server", false, "renew the server's certificate (server.crt, server.key)")
	flags.Var(duration.Var(&validity), "validity", "lifetime of the new certificate: days (90d) or a Go duration (default: that of the certificate it replaces)")
	flags.StringVar(&secretFile, "secret-file", "", "with --watcher: write the Secret manifest to this `file` (mode 0600, replaced) instead of standard output")
	pkiCompletions(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch {
		case dir == "":
			return usageError(cmd, "--dir: required: the folder 'pki init' wrote")
		case watcher == server:
			return usageError(cmd, "give exactly one of --watcher and --server")
		case server && secretFile != "":
			return usageError(cmd, "--secret-file is for --watcher: the server's certificate has no Secret")
		case validity != 0 && validity < tlspki.MinValidity:
			return usageError(cmd, "--validity %s: below the %s minimum", tlspki.FormatLifetime(validity), tlspki.FormatLifetime(tlspki.MinValidity))
		}
		leaf := tlspki.Server
		if watcher {
			leaf = tlspki.Watcher
		}
		r, err := tlspki.Renew(dir, leaf, tlspki.RenewOptions{Validity: validity})
		if err != nil {
			return pkiFileError(err)
		}
		if watcher {
			manifest, err := tlspki.ReadWatcherSecret(dir)
			if err != nil {
				return pkiFileError(err)
			}
			if err := writeSecret(cmd, secretFile, manifest); err != nil {
				return err
			}
		}
		writeRenewSummary(cmd.ErrOrStderr(), dir, secretFile, leaf, r)
		return nil
	}
	return cmd
}

// refuseOverwrite fails when a file pki init writes exists: those of DIR, the Secret file.
func refuseOverwrite(dir, secretFile string) error {
	var paths []string
	for _, f := range tlspki.Files() {
		paths = append(paths, filepath.Join(dir, f))
	}
	if secretFile != "" {
		paths = append(paths, secretFile)
	}
	found, err := tlspki.Existing(paths...)
	if err != nil {
		return inputError("%v", err)
	}
	if len(found) == 0 {
		return nil
	}
	var inDir, other []string
	for _, p := range found {
		if filepath.Dir(p) == filepath.Clean(dir) {
			inDir = append(inDir, filepath.Base(p))
		} else {
			other = append(other, p)
		}
	}
	if len(inDir) > 0 {
		other = append([]string{fmt.Sprintf("in %s: %s", dir, strings.Join(inDir, ", "))}, other...)
	}
	return failure("refusing to overwrite existing files (--force replaces them): %s", strings.Join(other, "; "))
}

// pkiCompletions registers the completions of the pki commands' flags that cmd has.
func pkiCompletions(cmd *cobra.Command) {
	_ = cmd.MarkFlagDirname("dir")
	_ = cmd.MarkFlagFilename("secret-file", "yaml", "yml")
	for _, name := range []string{"server-name", "server-ip", "watcher-identity", "cluster", "validity", "ca-validity", "namespace", "secret-name"} {
		if cmd.Flags().Lookup(name) != nil {
			_ = cmd.RegisterFlagCompletionFunc(name, cobra.NoFileCompletions)
		}
	}
	if cmd.Flags().Lookup("algorithm") != nil {
		_ = cmd.RegisterFlagCompletionFunc("algorithm", cobra.FixedCompletions(tlspki.Algorithms, cobra.ShellCompDirectiveNoFileComp))
	}
}

// writeSecret writes the Secret manifest to path (0600, atomically) or, without a path, to
// standard output.
func writeSecret(cmd *cobra.Command, path string, manifest []byte) error {
	if path == "" {
		_, err := cmd.OutOrStdout().Write(manifest)
		return err
	}
	if err := atomicfile.Write(path, manifest, 0o600); err != nil {
		return failure("%v", err)
	}
	return nil
}

// pkiFileError is the exit of a failed renewal: a missing, unreadable or too widely readable
// file of DIR is unusable input (exit 2); anything else (a CA that did not issue the
// certificate, an expired CA, a failed write) a failed operation (exit 1).
func pkiFileError(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, pemfile.ErrKeyFileMode) {
		return inputError("%v", err)
	}
	return failure("%v", err)
}
