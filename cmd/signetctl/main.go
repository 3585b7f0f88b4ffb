// Command signetctl is the operator's tool for Signet: it inspects what the signing service
// keeps on its host, and asks a running server about its signers and rotates their CAs.
//
//	signetctl ledger verify --dir /var/lib/signet/ledger
//	signetctl keys create --uri 'tpm:blob=/var/lib/signet/ca.tpmkey'
//	signetctl ca init --key 'tpm:blob=/var/lib/signet/ca.tpmkey' --subject 'CN=Kubernetes CA'
//	signetctl ca stage --signer example.com/serving --key URI --cert next.crt (then ca status, ca activate, ca retire)
//	signetctl help
//
// Exit codes: 0 success, 1 the check failed or the server refused, 2 usage error (or, for
// commands that call the server, no answer from it).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
)

// streams are where a command writes: results to out, diagnostics and usage errors to err.
type streams struct {
	out, err io.Writer
}

// command is one subcommand: its name, a one-line summary for help, and run, which gets the
// arguments after the name and returns the exit code.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, s streams, args []string) int
}

// commands returns the top-level subcommands, in help order. Each lives in its own file; add
// new ones (signers, explain) here.
func commands() []command {
	return []command{
		ledgerCommand(),
		signersCommand(),
		explainCommand(),
		keysCommand(),
		caCommand(),
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, streams{out: os.Stdout, err: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs the signetctl command line args (without the program name).
func run(ctx context.Context, s streams, args []string) int {
	return dispatch(ctx, s, "signetctl", commands(), args)
}

// dispatch runs the command of cmds named by args[0] with the remaining args. "help", "-h" and
// "--help" list cmds (exit 0); "help NAME" is "NAME -h"; no or an unknown name lists them on the
// error stream (exit 2).
func dispatch(ctx context.Context, s streams, prog string, cmds []command, args []string) int {
	if len(args) == 0 {
		usage(s.err, prog, cmds)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			usage(s.out, prog, cmds)
			return 0
		}
		name, rest = rest[0], []string{"-h"}
	}
	for _, c := range cmds {
		if c.name == name {
			return c.run(ctx, s, rest)
		}
	}
	fmt.Fprintf(s.err, "%s: unknown command %q\n\n", prog, name)
	usage(s.err, prog, cmds)
	return 2
}

// usage lists cmds.
func usage(w io.Writer, prog string, cmds []command) {
	fmt.Fprintf(w, "Usage: %s <command> [arguments]\n\nCommands:\n", prog)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range cmds {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	fmt.Fprintf(tw, "  help\t%s\n", "list the commands, or show one's usage: help <command>")
	tw.Flush()
}
