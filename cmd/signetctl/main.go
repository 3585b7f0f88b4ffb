// Command signetctl is the operator's tool for Signet: it inspects what the signing service
// keeps on its host (the ledger, keys, configuration files, certificates), asks a running
// server about its signers, health and trust anchors, and rotates the signers' CAs.
//
//	signetctl signers --dev-state-dir .signet-dev
//	signetctl explain --signer example.com/serving --usages "digital signature,server auth" csr.pem
//	signetctl ledger verify --dir /var/lib/signet/ledger
//	signetctl inspect cert.pem
//	signetctl completion bash
//
// Every command's exit code follows exitCodesHelp: 0 success, 1 refused or failed, 2 usage
// error or no answer from the server.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/internal/version"
)

// exitCodesHelp is the one set of exit codes every command uses; each command's help ends with
// it.
const exitCodesHelp = `Exit codes:
  0  success: done, the check passed, the request would be signed, the server is serving
  1  refused or failed: the server refused (its reason is printed), a check failed (a broken
     ledger, an invalid configuration, a request that would be refused, a signer not serving),
     or a local operation failed (a key device)
  2  usage error (unknown command or flag, missing or bad argument, unreadable input file) or
     no answer from the server (unreachable, TLS handshake, timeout, an error without a Signet
     reason)`

// streams are where a command reads and writes: results to out, diagnostics and usage errors
// to err; in is standard input (os.Stdin when nil).
type streams struct {
	in       io.Reader
	out, err io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, streams{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs the signetctl command line args (without the program name) and returns the exit
// code: the one an *exitError carries, 0 without error, 2 for any other error (cobra's own:
// an unknown command, a bad flag or argument count).
func run(ctx context.Context, s streams, args []string) int {
	if s.in == nil {
		s.in = os.Stdin
	}
	root := newRootCommand(s)
	root.SetArgs(singleDashLongFlags(root, args))
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = usageError(cmd, "%v", err).(*exitError)
	}
	ee.print(s.err, cmd)
	return ee.code
}

// newRootCommand builds the command tree writing to s.
func newRootCommand(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "signetctl",
		Short: "Operate Signet, the external signer for Kubernetes certificates",
		Long: `signetctl operates Signet, the external signer for Kubernetes certificates: it asks a running
signet-server about its signers (signers, explain, health, trust, version) and about a
request (status csr|pcr: the object's state, its Events and the server's ledger records),
rotates the signers' CAs (ca stage|activate|retire|status), makes CA keys and certificates
(keys, ca init|csr), and reads what the server keeps on its host (ledger) and the files around
it (inspect, validate).

Commands that call the server take the connection settings from flags, else from environment
variables, else from a config file (see 'signetctl help connection').

` + exitCodesHelp,
		Example: `  signetctl signers --dev-state-dir .signet-dev
  signetctl explain --signer signet.dev/dev --usages "digital signature,client auth" csr.pem
  signetctl ledger verify --dir /var/lib/signet/ledger
  source <(signetctl completion bash)`,
		Version:       version.String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError(cmd, "unknown command %q%s", args[0], suggest(cmd, args[0]))
			}
			return usageError(cmd, "missing command")
		},
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError(cmd, "%v", err) })
	root.AddGroup(&cobra.Group{ID: "server", Title: "Ask the server:"},
		&cobra.Group{ID: "host", Title: "On the server's host and offline:"})
	root.AddCommand(inGroup("server", signersCommand(), explainCommand(), healthCommand(), trustCommand(), caCommand(), attestCommand(), statusCommand(), versionCommand())...)
	root.AddCommand(inGroup("host", ledgerCommand(), keysCommand(), pkiCommand(), inspectCommand(), validateCommand())...)
	root.AddCommand(connectionHelpTopic())
	strictHelpCommand(root)
	return root
}

// strictHelpCommand makes "signetctl help TOPIC" a usage error (exit 2) for an unknown topic;
// cobra's own prints the usage and exits 0.
func strictHelpCommand(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	for _, h := range root.Commands() {
		if h.Name() != "help" {
			continue
		}
		h.Run = nil
		h.RunE = func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return usageError(c, "unknown help topic %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		}
	}
}

// singleDashLongFlags rewrites "-name" and "-name=value" to "--name…" where name is a long flag
// of the command args run: signetctl took Go's flag syntax before it moved to cobra, and its
// help showed "-tls-ca FILE". Values of flags and everything after "--" are left alone.
func singleDashLongFlags(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return args
	}
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	// flag reports whether name is a flag of cmd and whether it takes a value.
	flag := func(name string, short bool) (known, takesValue bool) {
		f := cmd.Flags().Lookup(name)
		switch {
		case short:
			f = cmd.Flags().ShorthandLookup(name)
		case f == nil:
			f = cmd.InheritedFlags().Lookup(name)
		}
		return f != nil, f != nil && f.NoOptDefVal == ""
	}
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		short := !strings.HasPrefix(a, "--") && len(name) == 1
		known, takesValue := flag(name, short)
		if known && !short && !strings.HasPrefix(a, "--") {
			out[i] = "-" + a
		}
		if takesValue && !hasValue {
			i++ // the next argument is this flag's value
		}
	}
	return out
}

// inGroup puts cmds in the help group id and returns them.
func inGroup(id string, cmds ...*cobra.Command) []*cobra.Command {
	for _, c := range cmds {
		c.GroupID = id
	}
	return cmds
}

// groupCommand is a command that only holds subs: without a subcommand, or with an unknown
// one, it is a usage error (exit 2); "help [SUB]" shows the help of the group or of SUB.
func groupCommand(use, short, long, example string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long + "\n\n" + exitCodesHelp,
		Example: example,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usageError(cmd, "missing command: one of %s", strings.Join(subNames(cmd), ", "))
			case args[0] == "help":
				target := cmd
				if len(args) > 1 {
					sub, _, err := cmd.Find(args[1:])
					if err != nil || sub == cmd {
						return usageError(cmd, "unknown command %q%s", args[1], suggest(cmd, args[1]))
					}
					target = sub
				}
				return target.Help()
			}
			return usageError(cmd, "unknown command %q%s", args[0], suggest(cmd, args[0]))
		},
	}
	c.AddCommand(subs...)
	return c
}

// subNames lists the names of cmd's available subcommands.
func subNames(cmd *cobra.Command) []string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return names
}

// suggest is cobra's "Did you mean this?" for an unknown subcommand name of cmd, or "".
func suggest(cmd *cobra.Command, name string) string {
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		return fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
	}
	return ""
}
