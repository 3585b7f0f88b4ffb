package ociimage

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
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
		return singlePlatform(img, p, r.String())
	}, nil
}

// BaseFromLayout returns a Spec.Base that takes each platform's image from the OCI image
// layout at dir (a base vendored into the repository or copied in with `crane pull
// --format=oci`): the first entry of its index.json, a multi-platform index or a single image.
func BaseFromLayout(dir string) (func(v1.Platform) (v1.Image, error), error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("base layout %s: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("base layout %s: %w", dir, err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("base layout %s: %w", dir, err)
	}
	if len(m.Manifests) == 0 {
		return nil, fmt.Errorf("base layout %s: index.json lists no image", dir)
	}
	d := m.Manifests[0]
	return func(pl v1.Platform) (v1.Image, error) {
		if d.MediaType.IsIndex() {
			idx, err := top.ImageIndex(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("base layout %s: %w", dir, err)
			}
			return imageFor(idx, pl, dir)
		}
		img, err := top.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("base layout %s: %w", dir, err)
		}
		return singlePlatform(img, pl, dir)
	}, nil
}

// singlePlatform returns img if it is for platform p.
func singlePlatform(img v1.Image, p v1.Platform, what string) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the base image %s: %w", what, err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		return nil, fmt.Errorf("base image %s is %s/%s only, not %s/%s", what, cf.OS, cf.Architecture, p.OS, p.Architecture)
	}
	return img, nil
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
