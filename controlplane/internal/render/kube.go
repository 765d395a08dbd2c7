package render

import (
	"jr2.dev/boundary/controlplane/internal/bootstrap"
	"jr2.dev/boundary/controlplane/internal/kube"
	"jr2.dev/boundary/controlplane/internal/manifest"
	"jr2.dev/boundary/controlplane/internal/pki"
	"jr2.dev/boundary/filter"
)

// podEnvoyInput is the pod's envoy.json: the module data plane, loading
// the Custodian image's module, its files under the pod's config
// directory, its admin socket DIR's own.
func podEnvoyInput(o Options, cfg *filter.Config, cfgJSON []byte, admin string) bootstrap.Input {
	dir := o.Kube.ConfigDir
	if dir == "" {
		dir = kube.DefaultConfigDir
	}
	return bootstrap.Input{Config: cfg, ConfigJSON: cfgJSON, DataPlane: bootstrap.DataPlaneModule, Module: kube.ModulePath, MountDir: dir, AdminSocket: admin}
}

// kubeObjects builds the pod's Kubernetes objects (package kube) from this
// render's own results — custodian.json, harness.env, the trust files and
// the leaves, the same bytes as DIR's files — and the pod's envoy.json
// (podEnvoyInput's). It adds them to files under DIR/kubernetes/ and
// DIR/kubernetes-patch/.
func kubeObjects(o Options, m *manifest.Manifest, cfg *filter.Config, cfgJSON, envoyJSON, harness []byte, trust pki.Trust, leaves []kube.Leaf, files map[string]file) (*kube.Set, error) {
	ko := o.Kube
	ko.ValuesDir, ko.HarnessCADir = o.ValuesDir, o.HarnessCADir
	if ko.ConfigDir == "" {
		ko.ConfigDir = kube.DefaultConfigDir
	}
	set, err := kube.Build(kube.Input{
		Manifest: m, Config: cfg, CustodianJSON: cfgJSON, EnvoyJSON: envoyJSON, HarnessEnv: harness,
		CA: o.CABundle, Extra: trust.Extra, Bundle: trust.Bundle, Upstream: trust.Upstream, Wgetrc: Wgetrc(o.HarnessCADir),
		Leaves: leaves, Options: ko,
	})
	if err != nil {
		return nil, err
	}
	objs, err := kube.Files(set)
	if err != nil {
		return nil, err
	}
	for name, b := range objs {
		files[name] = file{data: b, mode: 0o644}
	}
	return set, nil
}
