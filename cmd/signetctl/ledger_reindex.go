package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/server/ledger"
)

// ledgerReindexCommand is "signetctl ledger reindex": rebuild the index and the tree tiles of
// a ledger from its segments (ledger.Reindex), with the server stopped.
func ledgerReindexCommand() *cobra.Command {
	var dir string
	var archives []string
	cmd := &cobra.Command{
		Use:   "reindex --dir DIR [--archive DIR...]",
		Short: "Rebuild the ledger's index and tree tiles from its segments (server stopped)",
		Long: `Rebuilds what signet-server keeps beside the ledger's segments in DIR, the index (index.db: where
each record lies, lookups by serial and object UID, the state records) and the Merkle tree
as tiles (tiles/), by reading every record from segment 1 and checking the chain. The records
are not changed, so proofs and checkpoints stay valid. Run it with the server stopped (it
takes the ledger's lock), when the server says its index is damaged or behind in a way it
cannot catch up from, or after restoring segments from a backup. Closed segments moved to
archive storage are read from the --archive directories; their records are then indexed but
can be read back (proofs, lookups) only once the segments are put back in DIR.

The server does not need this after a crash: it indexes the records written since the last
index write by itself at start.

` + exitCodesHelp,
		Example: `  systemctl stop signet-server
  signetctl ledger reindex --dir /var/lib/signet/ledger
  systemctl start signet-server`,
		Args: cobra.NoArgs,
	}
	addLedgerDir(cmd, &dir)
	addArchives(cmd, &archives)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		st, err := ledger.Reindex(dir, ledger.Options{}, archives...)
		var ce *ledger.CorruptionError
		switch {
		case errors.Is(err, ledger.ErrLocked):
			return failure("%v: stop signet-server first", err)
		case errors.As(err, &ce):
			return failure("%v", err)
		case err != nil:
			return inputError("%v", err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "ledger reindexed: %d records read, index and tree tiles rebuilt in %s\n", st.ReadAtOpen, dir)
		return nil
	}
	return cmd
}
