package main

import (
	"errors"
	"fmt"
	"os/user"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/server/ledger"
)

// ledgerNewHistoryCommand is "signetctl ledger new-history": the audited way to start a new
// ledger history when the server refuses its ledger (ledger.StartNewHistory).
func ledgerNewHistoryCommand() *cobra.Command {
	var dir, operator, reason string
	cmd := &cobra.Command{
		Use:   "new-history --dir DIR --reason TEXT [--operator NAME]",
		Short: "Start a new ledger history (server stopped), archiving the previous one",
		Long: `Starts a new history in the ledger directory DIR, for when the previous one was lost or cannot be
trusted and signet-server refuses to start on it (records missing from its end, another
history than its last checkpoint). Run it on the server's host with the server stopped (it
takes the ledger's lock). It moves the segment and its checkpoint to DIR/history-<unix time>/,
untouched, then writes a new ledger whose first record ("started") names you (--operator,
default your user name), your reason and the archived history (its record count, last hash and
what verifying it said), followed by each signer's last CA set, so that CA rotations survive.
Certificates issued before are not returned again for a retried request.

The watchers' ledger witnesses will see the log start over and raise their alarm; once you have
checked, accept the new history there by deleting the log's entry from their ConfigMap
signet-ledger-witness (docs/ledger.md).

` + exitCodesHelp,
		Example: `  systemctl stop signet-server
  signetctl ledger new-history --dir /var/lib/signet/ledger --reason "records cut from the end, incident 42"
  systemctl start signet-server`,
		Args: cobra.NoArgs,
	}
	addLedgerDir(cmd, &dir)
	cmd.Flags().StringVar(&reason, "reason", "", "why the history starts over (recorded in its first record)")
	cmd.Flags().StringVar(&operator, "operator", "", "who starts it (recorded; default the current user name)")
	_ = cmd.MarkFlagRequired("reason")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if operator == "" {
			u, err := user.Current()
			if err != nil || u.Username == "" {
				return usageError(cmd, "--operator is required: the current user name is unknown")
			}
			operator = u.Username
		}
		h, err := ledger.StartNewHistory(dir, operator, reason, ledger.Options{})
		switch {
		case errors.Is(err, ledger.ErrLocked):
			return failure("%v: stop signet-server first", err)
		case err != nil:
			return inputError("%v", err)
		}
		w := cmd.OutOrStdout()
		if h.Archive == "" {
			fmt.Fprintf(w, "new ledger history started in %s (there was none before)\n", dir)
		} else {
			fmt.Fprintf(w, "previous history archived in %s: %d records, last seq %d\n", h.Archive, h.Previous.Records, h.Previous.LastSeq)
			if h.PreviousErr != nil {
				fmt.Fprintf(w, "  it did not verify: %v\n", h.PreviousErr)
			}
			fmt.Fprintf(w, "new history started in %s: record 1 (started by %s), %d CA set(s) carried over\n", dir, operator, len(h.Carried))
		}
		fmt.Fprintln(w, "next: start signet-server, then accept the new history in each watcher's ledger witness (docs/ledger.md)")
		return nil
	}
	return cmd
}
