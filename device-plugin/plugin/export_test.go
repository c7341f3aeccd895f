package plugin

// Test helpers of this package that the external tests (package
// plugin_test) share.
var (
	FindDevice   = device
	CountHealthy = healthyCount
)
