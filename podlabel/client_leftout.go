//go:build nokubernetes

package podlabel

import "errors"

func newAPI(string) (api, string, error) {
	return nil, "", errors.New("this build leaves out Kubernetes (-tags nokubernetes); build without that tag")
}
