// Package kubeapply holds the tests that apply what `controlplane render`
// writes under DIR/kubernetes/ to a real kube-apiserver (internal/testkit/kubetest):
// every object accepted server-side as it is, re-applied without change, a
// changed manifest updating the objects in place, the 200-secret /
// 400-target render, the Pod as the server stores it, the pod-template
// patch on a Deployment, and the documented kubectl lines run as written.
//
// Invariant: it has no code but its tests; what they apply is render's
// output, unedited, and what they check is what the server read back.
package kubeapply
