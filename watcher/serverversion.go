package watcher

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/internal/version"
	"github.com/signet-pki/signet/signerclient"
)

// ErrUnsupportedVersion is returned by Run when the signing server refuses this watcher's
// version (the skew policy, docs/compatibility.md).
var ErrUnsupportedVersion = errors.New("the signing server does not accept this watcher's version")

// versionChecker is the part of the signing client the start-up version check uses.
type versionChecker interface {
	ServerInfo(ctx context.Context) (signerclient.ServerInfo, error)
}

// checkServerVersion is the watcher's first call to the signing server: GetServerInfo, which
// carries this watcher's version (ownVersion) like every call, so that the server applies its
// skew policy at once rather than at the first object.
//
//   - The server refuses the version: an error wrapping ErrUnsupportedVersion with the
//     server's message (both versions, which it accepts, what to do), and the watcher does not
//     start.
//   - The server answers: its version is logged, and a development build on either side
//     (accepted without a check) is logged as an error-level warning, since production runs
//     released versions.
//   - No server answers (unreachable, an older fake without GetServerInfo): logged, and the
//     start goes on; every signing call carries the version and is checked then, a refusal
//     keeping the objects waiting (reason UnsupportedClientVersion) rather than failing them.
func checkServerVersion(ctx context.Context, client versionChecker, ownVersion string, logger klog.Logger) error {
	info, err := client.ServerInfo(ctx)
	if refusal, refused := signerclient.UnsupportedVersion(err); refused {
		return fmt.Errorf("%w: %s", ErrUnsupportedVersion, refusal.Message)
	}
	if err != nil {
		logger.Info("Could not ask the signing server for its version; every call is checked by the server", "watcherVersion", ownVersion,
			"err", err)
		return nil
	}
	skew := version.CheckSkew(info.Version, ownVersion)
	logger.Info("Signing server version", "serverVersion", info.Version, "serverCommit", info.Commit, "watcherVersion", ownVersion,
		"skew", skew.Verdict.String())
	if skew.Verdict == version.Development {
		logger.Error(nil, "Development build: no version check between the watcher and the signing server", "serverVersion", info.Version,
			"watcherVersion", ownVersion, "message", skew.Message())
	}
	return nil
}
