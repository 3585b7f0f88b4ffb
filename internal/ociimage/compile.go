package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// GoBuild says how to compile the image's program.
type GoBuild struct {
	// Go is the go command (default "go").
	Go string
	// Dir is the module's directory (the repository root).
	Dir string
	// Package is the main package (./cmd/signet-watcher).
	Package string
	// LDFlags are passed as -ldflags (make's daemon and version flags).
	LDFlags string
}

// Compile cross-compiles b.Package for platform into outDir/<os>_<arch>/<name> and returns
// the file's path. The build is static and reproducible: CGO_ENABLED=0, -trimpath,
// -buildvcs=false (the version comes from LDFlags, and the state of the work tree stays out
// of the binary), GOFLAGS and GOENV of the caller ignored, GOTOOLCHAIN=local.
func Compile(ctx context.Context, b GoBuild, platform v1.Platform, name, outDir string) (string, error) {
	goCmd := b.Go
	if goCmd == "" {
		goCmd = "go"
	}
	out, err := filepath.Abs(filepath.Join(outDir, platform.OS+"_"+platform.Architecture, name))
	if err != nil {
		return "", fmt.Errorf("compiling %s: %w", b.Package, err)
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-o", out}
	if b.LDFlags != "" {
		args = append(args, "-ldflags="+b.LDFlags)
	}
	args = append(args, b.Package)
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = b.Dir
	env := []string{"CGO_ENABLED=0", "GOOS=" + platform.OS, "GOARCH=" + platform.Architecture,
		"GOFLAGS="}
	if platform.Architecture == "arm" && platform.Variant != "" {
		env = append(env, "GOARM="+platform.Variant[1:])
	}
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s for %s/%s: %w\n%s", b.Package, platform.OS, platform.Architecture, err, stderr.Bytes())
	}
	return out, nil
}
