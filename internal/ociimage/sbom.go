package ociimage

import (
	"bytes"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// SBOMMediaType is the media type of the SBOM documents SBOM writes (CycloneDX 1.6 JSON).
const SBOMMediaType = "application/vnd.cyclonedx+json"

// SBOMComponent describes the program an SBOM is about, beyond what its build info says.
type SBOMComponent struct {
	// Name is the program's name (signet-watcher).
	Name string
	// Version is the version it was stamped with (make's VERSION); the main module's version
	// in the build info is "(devel)" for a build from a checkout.
	Version string
	// License is an SPDX license expression (Apache-2.0).
	License string
	// Source is the project's URL.
	Source string
	// Created is the SBOM's timestamp: the commit's date, so the document is reproducible.
	Created time.Time
}

// SBOM returns a CycloneDX 1.6 JSON software bill of materials for the Go program whose
// build info is info (debug/buildinfo.ReadFile of the binary): the program as the metadata
// component (its main module, the given version, purl pkg:golang/…), the Go standard library
// at the toolchain's version, and every module it links with its version, purl and module
// hash (the h1: dirhash, as its SHA-256 in hex, as cyclonedx-gomod records it), a replaced
// module under its replacement. The build settings (GOOS, GOARCH, CGO_ENABLED, -trimpath, …)
// are properties of the program. The output is stable: components sorted by path, no serial
// number, the timestamp from c.Created.
func SBOM(info *debug.BuildInfo, c SBOMComponent) ([]byte, error) {
	if info == nil || info.Main.Path == "" {
		return nil, fmt.Errorf("writing the SBOM of %s: no build info (not a Go module build)", c.Name)
	}
	mainRef := purl(info.Main.Path, c.Version)
	main := cdx.Component{
		BOMRef:     mainRef,
		Type:       cdx.ComponentTypeApplication,
		Name:       c.Name,
		Version:    c.Version,
		PackageURL: mainRef,
		Properties: buildProperties(info),
	}
	if c.License != "" {
		main.Licenses = &cdx.Licenses{{Expression: c.License}}
	}
	if c.Source != "" {
		main.ExternalReferences = &[]cdx.ExternalReference{{Type: cdx.ERTypeVCS, URL: c.Source}}
	}
	main.Description = "Go module " + info.Main.Path + ", main package " + info.Path

	goVersion := strings.TrimPrefix(info.GoVersion, "go")
	std := cdx.Component{
		BOMRef:      purl("std", goVersion),
		Type:        cdx.ComponentTypeLibrary,
		Name:        "std",
		Version:     goVersion,
		PackageURL:  purl("std", goVersion),
		Description: "the Go standard library and runtime (" + info.GoVersion + ")",
	}
	components := []cdx.Component{std}
	refs := []string{std.BOMRef}
	deps := append([]*debug.Module(nil), info.Deps...)
	sort.Slice(deps, func(i, j int) bool { return deps[i].Path < deps[j].Path })
	for _, d := range deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		comp := cdx.Component{
			BOMRef:     purl(m.Path, m.Version),
			Type:       cdx.ComponentTypeLibrary,
			Name:       m.Path,
			Version:    m.Version,
			PackageURL: purl(m.Path, m.Version),
			Scope:      cdx.ScopeRequired,
		}
		if h, ok := moduleHash(m.Sum); ok {
			comp.Hashes = &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: h}}
		}
		if d.Replace != nil {
			comp.Properties = &[]cdx.Property{{Name: "cdx:gomod:replaces", Value: d.Path + "@" + d.Version}}
		}
		components = append(components, comp)
		refs = append(refs, comp.BOMRef)
	}

	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: c.Created.UTC().Format(time.RFC3339),
		Component: &main,
	}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{{Ref: mainRef, Dependencies: &refs}}
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("encoding the SBOM of %s: %w", c.Name, err)
	}
	return buf.Bytes(), nil
}

// SBOMOfBinary reads the build info of the Go binary at path and returns SBOM's document.
func SBOMOfBinary(path string, c SBOMComponent) ([]byte, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the build info of %s: %w", path, err)
	}
	return SBOM(info, c)
}

// purl is the package URL of a Go module (or of std) at version.
func purl(module, version string) string {
	if version == "" || version == "(devel)" {
		return "pkg:golang/" + module
	}
	return "pkg:golang/" + module + "@" + version + "?type=module"
}

// moduleHash turns a go.sum hash ("h1:" base64 SHA-256) into hex.
func moduleHash(sum string) (string, bool) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 32 {
		return "", false
	}
	return hex.EncodeToString(raw), true
}

// buildProperties lists the build settings (debug.BuildSetting) as cdx:gomod:build: properties.
func buildProperties(info *debug.BuildInfo) *[]cdx.Property {
	props := []cdx.Property{{Name: "cdx:gomod:build:goVersion", Value: info.GoVersion}}
	for _, s := range info.Settings {
		props = append(props, cdx.Property{Name: "cdx:gomod:build:setting:" + s.Key, Value: s.Value})
	}
	return &props
}
