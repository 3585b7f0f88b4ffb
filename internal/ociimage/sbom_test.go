package ociimage

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// testBuildInfo is what `go version -m` prints for a program with two modules, one of them
// replaced.
const testBuildInfo = `go	go1.26.8
path	github.com/signet-pki/signet/cmd/prog
mod	github.com/signet-pki/signet	(devel)	
dep	google.golang.org/grpc	v1.85.0	h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=
dep	github.com/weppos/publicsuffix-go	v0.50.4-0.20260821095816-b0fdb5c2d345	
=>	github.com/weppos/publicsuffix-go	v0.50.3	h1:LPeY69RlX6E2qT3vR3b8kY0zfVXSqL0KNPoCg7HlCNw=
build	-trimpath=true
build	CGO_ENABLED=0
build	GOARCH=arm64
build	GOOS=linux
`

// TestSBOMOfBuildInfo: the SBOM names the program with the given version, the Go toolchain,
// and every module it links, with its version and module hash, a replaced one as its
// replacement.
func TestSBOMOfBuildInfo(t *testing.T) {
	info, err := debug.ParseBuildInfo(testBuildInfo)
	if err != nil {
		t.Fatal(err)
	}
	info.GoVersion = "go1.26.8" // from the binary's header, not the text
	c := SBOMComponent{Name: "prog", Version: "v1.2.3", License: "Apache-2.0", Source: "https://example.org/prog", Created: testCreated}
	doc, err := SBOM(info, c)
	if err != nil {
		t.Fatal(err)
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(doc), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatalf("the SBOM does not decode as CycloneDX: %v", err)
	}
	if bom.SpecVersion != cdx.SpecVersion1_6 || bom.Metadata == nil || bom.Metadata.Timestamp != "2026-01-02T03:04:05Z" {
		t.Fatalf("spec %v, metadata %+v", bom.SpecVersion, bom.Metadata)
	}
	main := bom.Metadata.Component
	if main.Name != "prog" || main.Version != "v1.2.3" || main.PackageURL != "pkg:golang/github.com/signet-pki/signet@v1.2.3?type=module" {
		t.Errorf("main component %+v", main)
	}
	byName := map[string]cdx.Component{}
	for _, comp := range *bom.Components {
		byName[comp.Name] = comp
	}
	if std := byName["std"]; "go"+std.Version != info.GoVersion {
		t.Errorf("std component %+v, built with %s", std, info.GoVersion)
	}
	if len(info.Deps) == 0 {
		t.Fatal("the test binary has no dependencies in its build info")
	}
	for _, d := range info.Deps {
		comp, ok := byName[d.Path]
		if d.Replace != nil {
			comp, ok = byName[d.Replace.Path]
			d = d.Replace
		}
		if !ok || comp.Version != d.Version || comp.PackageURL != "pkg:golang/"+d.Path+"@"+d.Version+"?type=module" {
			t.Errorf("module %s %s: component %+v", d.Path, d.Version, comp)
			continue
		}
		if comp.Hashes == nil || len((*comp.Hashes)[0].Value) != 64 {
			t.Errorf("module %s: hashes %v: want the SHA-256 of its h1: sum", d.Path, comp.Hashes)
		}
	}
	if c := byName["github.com/weppos/publicsuffix-go"]; c.Version != "v0.50.3" || c.Properties == nil ||
		(*c.Properties)[0].Value != "github.com/weppos/publicsuffix-go@v0.50.4-0.20260821095816-b0fdb5c2d345" {
		t.Errorf("the replaced module in the SBOM: %+v", c)
	}
	if c := byName["google.golang.org/grpc"]; c.Hashes == nil || (*c.Hashes)[0].Value != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("grpc in the SBOM: %+v", c)
	}
	if deps := *bom.Dependencies; len(deps) != 1 || len(*deps[0].Dependencies) != len(info.Deps)+1 {
		t.Errorf("dependencies %+v: want the program depending on std and every module", deps)
	}
	again, _ := SBOM(info, c)
	if !bytes.Equal(doc, again) {
		t.Error("two SBOMs of the same build info differ")
	}
	if !json.Valid(doc) || !strings.Contains(string(doc), `"cdx:gomod:build:setting:GOARCH",
          "value": "arm64"`) {
		t.Error("the build settings are not in the SBOM")
	}
}

func TestModuleHash(t *testing.T) {
	for sum, want := range map[string]string{
		"h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"h2:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=": "",
		"h1:!!": "",
		"":      "",
	} {
		got, ok := moduleHash(sum)
		if got != want || ok != (want != "") {
			t.Errorf("moduleHash(%q) = %q, %v; want %q", sum, got, ok, want)
		}
	}
}
