// Command image builds the signet-watcher container image without a container daemon
// (internal/ociimage, go-containerregistry as a library), and pushes it. `make image` and
// `make image-push` run it.
//
//	image build -out bin/image -version v0.3.0 -commit <sha> -commit-date 2026-01-02T03:04:05Z -ldflags '…'
//	image push -layout bin/image/signet-watcher -registry ghcr.io/signet-pki
//
// build cross-compiles ./cmd/signet-watcher for each platform (CGO_ENABLED=0, -trimpath, the
// -ldflags make passes: version stamping and the daemons' GODEBUG default), assembles the
// multi-platform OCI image index (scratch, or -base: a registry image or a vendored OCI
// layout), and writes it as an
// OCI layout at <out>/<name>, as an OCI archive <out>/<name>.tar (for `ctr images import`,
// `docker load`, `podman load`), and its digest to <out>/<name>.digest. Every time in the
// image is the commit's date (-commit-date, else $SOURCE_DATE_EPOCH), so building the same
// commit twice gives the same digest.
//
// push writes the layout's index to <registry>/<name>:<tag> (the tag the layout was built
// with) and prints the digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/signet-pki/signet/internal/ociimage"
)

const (
	source      = "https://github.com/signet-pki/signet"
	license     = "Apache-2.0"
	description = "Signet's Kubernetes side: hands approved CSRs and PodCertificateRequests to signet-server and writes back the certificates"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("want a command: build or push")
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:], stdout)
	case "push":
		return push(ctx, args[1:], stdout)
	default:
		return fmt.Errorf("unknown command %q: want build or push", args[0])
	}
}

func build(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	var (
		out        = fs.String("out", "bin/image", "folder for the OCI layout <out>/<name>, the archive <out>/<name>.tar and <out>/<name>.digest")
		imgName    = fs.String("name", "signet-watcher", "the program, the file /<name> the image starts")
		pkg        = fs.String("package", "./cmd/signet-watcher", "the main package to build")
		repo       = fs.String("repo", "signet-watcher", "the image's repository, as the archive names it (a bare name is docker.io/library/<name>)")
		tag        = fs.String("tag", "", "the image tag (default: -version with + replaced by -)")
		platforms  = fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
		version    = fs.String("version", "", "the version the binary is stamped with (make's VERSION)")
		commit     = fs.String("commit", "", "the commit (make's COMMIT)")
		commitDate = fs.String("commit-date", "", "the commit's date, RFC 3339 (make's COMMIT_DATE); default $SOURCE_DATE_EPOCH")
		ldflags    = fs.String("ldflags", "", "go build -ldflags (make's daemon and version flags)")
		caBundle   = fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle for a scratch base (Debian's ca-certificates)")
		base       = fs.String("base", "", "a base image instead of scratch: a registry reference, or oci-layout:DIR for a vendored OCI layout (its own CA bundle and users are used)")
		goCmd      = fs.String("go", "go", "the go command")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" {
		return fmt.Errorf("build: -version is required")
	}
	created, err := creationTime(*commitDate, os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	if *tag == "" {
		*tag = ociimage.Tag(*version)
	}
	ref, err := name.NewTag(*repo + ":" + *tag)
	if err != nil {
		return fmt.Errorf("build: image name %s:%s: %w", *repo, *tag, err)
	}
	spec := ociimage.Spec{Name: *imgName, Description: description, Version: *version, Commit: *commit,
		Created: created, Source: source, License: license, ExposedPorts: []string{"9465/tcp"}}
	if dir, ok := strings.CutPrefix(*base, "oci-layout:"); ok {
		if spec.Base, err = ociimage.BaseFromLayout(dir); err != nil {
			return err
		}
	} else if *base != "" {
		if spec.Base, err = ociimage.BaseFromRemote(ctx, *base); err != nil {
			return err
		}
		spec.BaseName = *base
	} else if spec.CABundle, err = os.ReadFile(*caBundle); err != nil {
		return fmt.Errorf("build: the CA bundle for the scratch base (Debian: apt-get install ca-certificates): %w", err)
	}

	binDir, err := os.MkdirTemp("", "signet-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(binDir)
	gb := ociimage.GoBuild{Go: *goCmd, Package: *pkg, LDFlags: *ldflags}
	for _, p := range strings.Split(*platforms, ",") {
		plat, err := v1.ParsePlatform(strings.TrimSpace(p))
		if err != nil {
			return fmt.Errorf("build: platform %q: %w", p, err)
		}
		fmt.Fprintf(stdout, "go build %s for %s\n", *pkg, plat)
		bin, err := ociimage.Compile(ctx, gb, *plat, *imgName, binDir)
		if err != nil {
			return err
		}
		spec.Binaries = append(spec.Binaries, ociimage.Binary{Platform: *plat, Path: bin})
	}
	idx, err := ociimage.Build(spec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	dir := path.Join(*out, *imgName)
	if err := ociimage.WriteLayout(dir, idx, ref); err != nil {
		return err
	}
	if err := ociimage.WriteArchive(dir, dir+".tar", created); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	if err := os.WriteFile(dir+".digest", []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "built %s (%s) as %s\n  OCI layout: %s\n  archive:    %s (ctr -n k8s.io images import, docker load)\n  digest:     %s\n",
		ociimage.FullName(ref), *platforms, d, dir, dir+".tar", dir+".digest")
	return nil
}

// creationTime is the commit's date: commitDate (RFC 3339), else sourceDateEpoch (seconds).
func creationTime(commitDate, sourceDateEpoch string) (time.Time, error) {
	if commitDate != "" {
		t, err := time.Parse(time.RFC3339, commitDate)
		if err != nil {
			return time.Time{}, fmt.Errorf("build: -commit-date %q: %w", commitDate, err)
		}
		return t.UTC(), nil
	}
	if sourceDateEpoch != "" {
		s, err := strconv.ParseInt(sourceDateEpoch, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("build: SOURCE_DATE_EPOCH=%q: %w", sourceDateEpoch, err)
		}
		return time.Unix(s, 0).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("build: no commit date: set COMMIT_DATE (RFC 3339) or SOURCE_DATE_EPOCH outside a git checkout")
}

func push(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	var (
		dir      = fs.String("layout", "bin/image/signet-watcher", "the OCI layout make image wrote")
		registry = fs.String("registry", "", "where to push: <registry>/<name>:<tag> (e.g. ghcr.io/signet-pki)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *registry == "" {
		return fmt.Errorf("push: set REGISTRY (make image-push REGISTRY=ghcr.io/you)")
	}
	idx, anns, err := ociimage.ReadLayout(*dir)
	if err != nil {
		return err
	}
	tag := anns[ociimage.AnnotationRefName]
	ref, err := name.NewTag(strings.TrimSuffix(*registry, "/") + "/" + path.Base(*dir) + ":" + tag)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	d, err := ociimage.Push(ctx, idx, ref)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pushed %s\n%s@%s\n", ref, ref.Context(), d)
	return nil
}
