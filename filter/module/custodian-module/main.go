// Command custodian-module is the Custodian as an Envoy dynamic module
// (make module → bin/custodian-module.so), loaded by core Envoy's
// envoy.filters.http.dynamic_modules filter. It only links package
// filter/module, whose hooks it exports; everything it runs is tested
// there and, in every make test, inside a real Envoy (e2e).
package main

import _ "jr2.dev/boundary/filter/module"

func main() {}
