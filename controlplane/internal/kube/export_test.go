package kube

// JSONTree is jsonTree, for the tests of package kube_test.
var JSONTree = jsonTree
