// Command plugin is the Custodian's Envoy Go filter, built as a c-shared
// object (make plugin → custodian.so) that Envoy's golang filter loads. It
// only registers the adapter under the plugin name the rendered config
// uses; everything it runs is package envoyfilter, tested there. It has no
// tests: the SDK's cgo package links only inside Envoy.
package main

import (
	"github.com/envoyproxy/envoy/contrib/golang/filters/http/source/go/pkg/http"

	"jr2.dev/boundary/filter/envoyfilter"
	"jr2.dev/boundary/filter/pluginconf"
)

func init() {
	http.RegisterHttpFilterFactoryAndConfigParser(pluginconf.PluginName, envoyfilter.Factory, envoyfilter.NewParser())
}

func main() {}
