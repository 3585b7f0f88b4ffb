package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/signet-pki/signet/internal/version"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// versionReport is version's answer (-o json|yaml).
type versionReport struct {
	Client        version.Info  `json:"client"`
	Server        *version.Info `json:"server"`
	ServerAddress string        `json:"serverAddress,omitempty"`
	ServerNote    string        `json:"serverNote,omitempty"`
}

// versionCommand is "signetctl version".
func versionCommand() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show signetctl's build and the server's (version, commit, Go)",
		Long: `Shows the build of signetctl (its version from git describe, commit, commit date, Go version and
platform) and, when connection settings are given (flags, environment or config file), the
build of the server (GetServerInfo). Without them, or with --client, the server is not asked.
'signetctl --version' prints the client's line alone.

Exit 0 when shown (a server too old to tell its build is a note, not an error), 1 when the
server refuses the call, 2 on a usage error or when the server does not answer.

` + exitCodesHelp,
		Example: `  signetctl version --client
  signetctl version --dev-state-dir .signet-dev -o json`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "show the client's build only; do not ask the server")
	conn := addConnFlags(cmd)
	out := addOutputFlag(cmd, "the client's build, and the server's (null when not known)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		rep := versionReport{Client: version.Get()}
		var callErr error
		switch ask, err := conn.resolveOptional(); {
		case clientOnly:
			rep.ServerNote = "not asked (--client)"
		case err != nil:
			return err
		case !ask:
			rep.ServerNote = "not asked: no connection settings for signet-server (see 'signetctl help connection')"
		default:
			rep.ServerAddress = conn.settings.server
			rep.Server, rep.ServerNote, callErr = serverBuild(cmd.Context(), conn)
		}
		w := cmd.OutOrStdout()
		if !out.text() {
			if err := out.print(w, rep); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(w, "client: %s\n", rep.Client)
			if rep.Server != nil {
				fmt.Fprintf(w, "server: %s at %s\n", rep.Server, rep.ServerAddress)
			} else if rep.ServerNote != "" {
				fmt.Fprintf(w, "server: %s\n", rep.ServerNote)
			}
		}
		return callErr
	}
	return cmd
}

// serverBuild asks the server for its build (GetServerInfo). A server that predates the call
// gives a note, not an error; a failed call gives a note and its exit error.
func serverBuild(ctx context.Context, conn *connFlags) (*version.Info, string, error) {
	cc, err := conn.dial()
	if err != nil {
		return nil, "", err
	}
	defer cc.Close()
	callCtx, cancel := conn.callContext(ctx)
	defer cancel()
	resp, err := signetv1.NewSignerServiceClient(cc).GetServerInfo(callCtx, &signetv1.GetServerInfoRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return nil, "not available: the server predates GetServerInfo (see 'signet-server --version' on its host)", nil
	case err != nil:
		ee := conn.callError(err)
		return nil, "not available: " + ee.Error(), ee
	}
	return &version.Info{Version: resp.GetVersion(), Commit: resp.GetCommit(), GoVersion: resp.GetGoVersion()}, "", nil
}
