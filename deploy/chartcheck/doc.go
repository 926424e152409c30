// Package chartcheck holds the tests of deploy/: the Helm chart in helm/cantal rendered and
// linted with Helm's own library, and both the chart's output and the plain manifests in
// kubernetes/ decoded strictly into the Kubernetes API types, checking how the agent reads
// the host (host PID and network, /proc, /sys and / read-only) and that it holds no more
// privilege than it needs. It is a module of its own (deploy/go.mod) so that the agent's module
// does not depend on Helm and Kubernetes.
package chartcheck
