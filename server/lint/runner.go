package lint

import (
	"fmt"
	"sync"

	zx509 "github.com/zmap/zcrypto/x509"
	zl "github.com/zmap/zlint/v3/lint"
	"github.com/zmap/zlint/v3/util"
)

// runner runs a fixed list of certificate lints the way zl.CertificateLint.Execute does, but on
// lint instances that are built and configured once and then reused: zlint's Execute calls the
// lint's constructor and decodes its configuration by reflection for every certificate, which
// was a fifth of the gate's allocations. An instance set is used by one Check at a time (a
// sync.Pool hands them out); zlint's lints keep no state between CheckApplies/Execute calls
// other than what their constructor and Configure set (TestRunnerMatchesZlint compares the
// two runners over certificates that pass and fail).
type runner struct {
	lints  []*zl.CertificateLint
	config zl.Configuration
	sets   sync.Pool // of *[]zl.CertificateLintInterface, indexed like lints
}

// newRunner builds one instance set, to report configuration errors now rather than per check.
func newRunner(lints []*zl.CertificateLint, config zl.Configuration) (*runner, error) {
	r := &runner{lints: lints, config: config}
	set, err := r.newSet()
	if err != nil {
		return nil, err
	}
	r.sets.Put(set)
	return r, nil
}

func (r *runner) newSet() (*[]zl.CertificateLintInterface, error) {
	set := make([]zl.CertificateLintInterface, len(r.lints))
	for i, l := range r.lints {
		set[i] = l.Lint()
		if err := r.config.MaybeConfigure(set[i], l.Name); err != nil {
			return nil, fmt.Errorf("lint options: configuring %s: %w", l.Name, err)
		}
	}
	return &set, nil
}

// run calls visit with every lint and its result on cert.
func (r *runner) run(cert *zx509.Certificate, visit func(*zl.CertificateLint, *zl.LintResult)) error {
	set, _ := r.sets.Get().(*[]zl.CertificateLintInterface)
	if set == nil {
		var err error
		if set, err = r.newSet(); err != nil {
			return err
		}
	}
	defer r.sets.Put(set)
	for i, l := range r.lints {
		visit(l, execute(l, (*set)[i], cert))
	}
	return nil
}

// notApplicable and notEffective are shared results for the lints that do not run, most of them
// on every check; zlint allocates one each time. Nothing writes to a result.
var (
	notApplicable = &zl.LintResult{Status: zl.NA}
	notEffective  = &zl.LintResult{Status: zl.NE}
)

// execute is zl.CertificateLint.Execute on an existing instance: the framework's source filter,
// CheckApplies, CheckEffective, Execute, and a Fatal result for a lint that panics.
func execute(l *zl.CertificateLint, impl zl.CertificateLintInterface, cert *zx509.Certificate) (res *zl.LintResult) {
	defer func() {
		if err := recover(); err != nil {
			res = &zl.LintResult{Status: zl.Fatal, Details: fmt.Sprintf("'%s' panicked. Error: %v", l.Name, err)}
		}
	}()
	if !l.OverrideFrameworkFilter {
		switch {
		case l.Source == zl.CABFBaselineRequirements && !util.IsServerAuthCert(cert),
			l.Source == zl.CABFSMIMEBaselineRequirements && !util.IsEmailProtectionCert(cert),
			l.Source == zl.CABFCSBaselineRequirements && !util.IsCodeSigning(cert.PolicyIdentifiers):
			return notApplicable
		}
	}
	if !impl.CheckApplies(cert) {
		return notApplicable
	}
	if !l.CheckEffective(cert) {
		return notEffective
	}
	return impl.Execute(cert)
}
