package ociimage

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// BaseFromRemote returns a Spec.Base that takes each platform's image from the registry
// image ref (a multi-platform index or a single image), fetched once, with the default
// keychain's credentials. A platform the base does not have is an error.
func BaseFromRemote(ctx context.Context, ref string) (func(v1.Platform) (v1.Image, error), error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("base image %q: %w", ref, err)
	}
	var (
		once sync.Once
		desc *remote.Descriptor
		gerr error
	)
	get := func() (*remote.Descriptor, error) {
		once.Do(func() {
			desc, gerr = remote.Get(r, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
			if gerr != nil {
				gerr = fmt.Errorf("fetching the base image %s: %w", r, gerr)
			}
		})
		return desc, gerr
	}
	return func(p v1.Platform) (v1.Image, error) {
		d, err := get()
		if err != nil {
			return nil, err
		}
		if d.MediaType.IsIndex() {
			idx, err := d.ImageIndex()
			if err != nil {
				return nil, fmt.Errorf("reading the base index %s: %w", r, err)
			}
			return imageFor(idx, p, r.String())
		}
		img, err := d.Image()
		if err != nil {
			return nil, fmt.Errorf("reading the base image %s: %w", r, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("reading the base image %s: %w", r, err)
		}
		if cf.OS != p.OS || cf.Architecture != p.Architecture {
			return nil, fmt.Errorf("base image %s is %s/%s only, not %s/%s", r, cf.OS, cf.Architecture, p.OS, p.Architecture)
		}
		return img, nil
	}, nil
}

// imageFor returns the image of idx for platform p (OS and architecture, and the variant
// when p names one).
func imageFor(idx v1.ImageIndex, p v1.Platform, what string) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading the base index %s: %w", what, err)
	}
	for _, d := range m.Manifests {
		if d.Platform == nil || d.Platform.OS != p.OS || d.Platform.Architecture != p.Architecture {
			continue
		}
		if p.Variant != "" && d.Platform.Variant != p.Variant {
			continue
		}
		return idx.Image(d.Digest)
	}
	return nil, fmt.Errorf("base image %s has no %s/%s image", what, p.OS, p.Architecture)
}
