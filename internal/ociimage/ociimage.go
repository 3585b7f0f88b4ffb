// Package ociimage builds Signet's container images without a container daemon, with
// go-containerregistry as a library: a multi-platform OCI image index of static Go binaries,
// reproducible (every time is the commit's date, tar entries sorted, owners and modes fixed, so
// the same commit and the same CA bundle give the same index digest), running as the numeric
// non-root user 65532:65532, labelled and annotated with the org.opencontainers.image.* keys,
// and carrying a CycloneDX SBOM of the binary inside the image.
//
// The base is scratch by default, with one layer holding what a static Go program needs from
// a distribution (/etc/passwd and /etc/group with nonroot 65532, the CA bundle, nsswitch.conf,
// /tmp and the nonroot home), or any image given as a base (a registry base, BaseFromRemote).
// Build assembles the index; WriteLayout, WriteArchive and Push put it where it goes.
package ociimage

import (
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user, its home and where things live in it.
const (
	// UID and GID are the numeric user and group the image runs as (distroless's nonroot), so
	// that the kubelet can check runAsNonRoot.
	UID = 65532
	GID = 65532
	// User is the config's User.
	User = "65532:65532"
	// CABundlePath is where the CA certificates go (Go's crypto/x509 looks there first).
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// SBOMDir holds the SBOM documents, one per program: SBOMDir/<name>.cdx.json.
	SBOMDir = "/sbom"
)

// The org.opencontainers.image.* keys set as config labels and as manifest and index
// annotations.
const (
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
	LabelVersion     = "org.opencontainers.image.version"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelCreated     = "org.opencontainers.image.created"
	LabelSource      = "org.opencontainers.image.source"
	LabelLicenses    = "org.opencontainers.image.licenses"
	LabelBaseName    = "org.opencontainers.image.base.name"
	LabelBaseDigest  = "org.opencontainers.image.base.digest"
)

// Binary is one platform's program.
type Binary struct {
	Platform v1.Platform
	// Path is the compiled program on disk (Compile's output).
	Path string
}

// Spec describes the image.
type Spec struct {
	// Name is the program's name: the file /<Name> the image starts, and its title.
	Name        string
	Description string
	// Version and Commit are what the binaries were stamped with; Created is the commit's
	// date, used for every time in the image.
	Version string
	Commit  string
	Created time.Time
	Source  string
	License string
	// Binaries are the platforms, in index order.
	Binaries []Binary
	// CABundle is the PEM CA bundle put at CABundlePath on a scratch base.
	CABundle []byte
	// Base, when set, is the base image for a platform (BaseFromRemote); BaseName is its
	// reference, recorded as org.opencontainers.image.base.name. Unset: scratch plus the
	// root file system layer.
	Base     func(v1.Platform) (v1.Image, error)
	BaseName string
	// ExposedPorts lists the container ports ("9465/tcp").
	ExposedPorts []string
}

// Build returns the OCI image index of spec: one image per binary, each of them the base (or
// scratch with the root file system layer), then a layer with /<Name> (0755, root-owned), then
// a layer with its SBOM at SBOMDir/<Name>.cdx.json; entrypoint /<Name>, user 65532:65532,
// working directory /, and the labels in the config, the manifest and the index.
func Build(spec Spec) (v1.ImageIndex, error) {
	if spec.Name == "" || len(spec.Binaries) == 0 {
		return nil, fmt.Errorf("building an image: want a name and at least one binary")
	}
	if spec.Created.IsZero() {
		return nil, fmt.Errorf("building the %s image: no creation time (the commit's date)", spec.Name)
	}
	labels := spec.labels()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, b := range spec.Binaries {
		img, err := spec.image(b, labels)
		if err != nil {
			return nil, err
		}
		p := b.Platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	out, ok := mutate.Annotations(idx, labels).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("building the %s image: annotating the index", spec.Name)
	}
	return out, nil
}

// labels returns the org.opencontainers.image.* values of spec.
func (spec Spec) labels() map[string]string {
	l := map[string]string{
		LabelTitle:   spec.Name,
		LabelVersion: spec.Version,
		LabelCreated: spec.Created.UTC().Format(time.RFC3339),
	}
	for k, v := range map[string]string{
		LabelDescription: spec.Description,
		LabelRevision:    spec.Commit,
		LabelSource:      spec.Source,
		LabelLicenses:    spec.License,
		LabelBaseName:    spec.BaseName,
	} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

// image builds one platform's image.
func (spec Spec) image(b Binary, labels map[string]string) (v1.Image, error) {
	platform := b.Platform.OS + "/" + b.Platform.Architecture
	fail := func(err error) (v1.Image, error) {
		return nil, fmt.Errorf("building the %s image for %s: %w", spec.Name, platform, err)
	}
	created := v1.Time{Time: spec.Created.UTC()}
	base, layerType, err := spec.base(b.Platform)
	if err != nil {
		return fail(err)
	}
	var adds []mutate.Addendum
	if spec.Base == nil {
		root, err := NewLayer(RootFS(spec.CABundle), spec.Created, layerType)
		if err != nil {
			return fail(err)
		}
		adds = append(adds, mutate.Addendum{Layer: root, History: v1.History{Created: created,
			CreatedBy: "ociimage: /etc/passwd, /etc/group (nonroot 65532), " + CABundlePath + ", /etc/nsswitch.conf, /tmp, /home/nonroot",
			Comment:   "root file system"}})
	}
	data, err := readBinary(b.Path)
	if err != nil {
		return fail(err)
	}
	bin, err := NewLayer([]File{{Path: "/" + spec.Name, Mode: 0o755, Data: data}}, spec.Created, layerType)
	if err != nil {
		return fail(err)
	}
	sbom, err := SBOMOfBinary(b.Path, SBOMComponent{Name: spec.Name, Version: spec.Version,
		License: spec.License, Source: spec.Source, Created: spec.Created})
	if err != nil {
		return fail(err)
	}
	sbomLayer, err := NewLayer([]File{{Path: SBOMDir + "/" + spec.Name + ".cdx.json", Mode: 0o644, Data: sbom}}, spec.Created, layerType)
	if err != nil {
		return fail(err)
	}
	adds = append(adds,
		mutate.Addendum{Layer: bin, History: v1.History{Created: created, CreatedBy: "ociimage: /" + spec.Name + " (go build, " + platform + ")", Comment: "binary"}},
		mutate.Addendum{Layer: sbomLayer, History: v1.History{Created: created, CreatedBy: "ociimage: " + SBOMDir + "/" + spec.Name + ".cdx.json", Comment: "CycloneDX SBOM of the binary"}},
	)

	cf, err := base.ConfigFile()
	if err != nil {
		return fail(fmt.Errorf("reading the base's config: %w", err))
	}
	cfg := cf.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Variant = b.Platform.Architecture, b.Platform.OS, b.Platform.Variant
	cfg.Created = created
	cfg.Author = ""
	cfg.Config.User = User
	cfg.Config.WorkingDir = "/"
	cfg.Config.Entrypoint = []string{"/" + spec.Name}
	cfg.Config.Cmd = nil
	if cfg.Config.Labels == nil {
		cfg.Config.Labels = map[string]string{}
	}
	for k, v := range labels {
		cfg.Config.Labels[k] = v
	}
	if len(spec.ExposedPorts) > 0 {
		cfg.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range spec.ExposedPorts {
			cfg.Config.ExposedPorts[p] = struct{}{}
		}
	}
	img, err := mutate.ConfigFile(base, cfg)
	if err != nil {
		return fail(err)
	}
	if img, err = mutate.Append(img, adds...); err != nil {
		return fail(err)
	}
	anns := labels
	if spec.Base != nil {
		if d, err := base.Digest(); err == nil {
			anns = copyMap(labels)
			anns[LabelBaseDigest] = d.String()
		}
	}
	out, ok := mutate.Annotations(img, anns).(v1.Image)
	if !ok {
		return fail(fmt.Errorf("annotating the manifest"))
	}
	return out, nil
}

// base returns the base image of a platform and the media type its layers take: scratch as
// an OCI image, or spec.Base's (an OCI base takes OCI layers, a Docker one Docker layers).
func (spec Spec) base(p v1.Platform) (v1.Image, types.MediaType, error) {
	if spec.Base == nil {
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		return mutate.ConfigMediaType(img, types.OCIConfigJSON), types.OCILayer, nil
	}
	img, err := spec.Base(p)
	if err != nil {
		return nil, "", fmt.Errorf("getting the base image: %w", err)
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, "", fmt.Errorf("reading the base image's media type: %w", err)
	}
	if mt == types.DockerManifestSchema2 {
		return img, types.DockerLayer, nil
	}
	return img, types.OCILayer, nil
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
