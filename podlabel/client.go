//go:build !nokubernetes

package podlabel

import (
	"context"
	"encoding/json"
	"errors"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/leaderrun/leaderrun/lease/kubernetes"
)

// The client speaks to the core API group's pods without its types (which
// would link k8s.io/api/core/v1 into every leaderrun): merge patches of
// raw JSON, and lists read as object metadata.
var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"}) // Status, the options
	return serializer.NewCodecFactory(s)
}()

// client is the api of a real API server.
type client struct {
	rc   rest.Interface
	conn *kubernetes.Connection // its Scrub takes the credentials out of errors
}

// newAPI returns the client of the API server that the k8s:// DSN's
// configuration names, and that configuration's namespace.
func newAPI(dsn string) (api, string, error) {
	conn, err := kubernetes.Config(dsn)
	if err != nil {
		return nil, "", err
	}
	cfg := rest.CopyConfig(conn.REST)
	cfg.APIPath = "/api"
	cfg.GroupVersion = &schema.GroupVersion{Version: "v1"}
	cfg.NegotiatedSerializer = codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, "", err
	}
	return &client{rc: rc, conn: conn}, conn.Namespace, nil
}

func (c *client) setLabel(ctx context.Context, pod Pod, key string, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{key: value}}})
	if err != nil {
		return err
	}
	err = c.rc.Patch(types.MergePatchType).Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		Body(patch).Do(ctx).Error()
	return c.scrub(err)
}

func (c *client) labelled(ctx context.Context, namespace string, l Label) ([]string, error) {
	raw, err := c.rc.Get().Namespace(namespace).Resource("pods").Param("labelSelector", l.String()).
		// The pods' metadata alone, where the server can.
		SetHeader("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json").
		Do(ctx).Raw()
	if err != nil {
		return nil, c.scrub(err)
	}
	var list metav1.PartialObjectMetadataList
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names, nil
}

func (c *client) describe(err error) (cause string, forbidden bool) {
	var netErr net.Error
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden", true
	case apierrors.IsNotFound(err):
		return "no such pod", false
	case apierrors.IsUnauthorized(err):
		return "the server rejects the credentials", false
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr):
		return "no answer from the API server", false
	}
	if status, ok := err.(apierrors.APIStatus); ok {
		return string(status.Status().Reason), false
	}
	return "error", false
}

// scrub takes every credential out of err's text, where a server or a
// proxy echoed it.
func (c *client) scrub(err error) error {
	if err == nil {
		return nil
	}
	if text := c.conn.Scrub(err.Error()); text != err.Error() {
		return &scrubbed{text, err}
	}
	return err
}

// scrubbed is an error whose text had a secret taken out.
type scrubbed struct {
	text string
	err  error
}

func (e *scrubbed) Error() string { return e.text }
func (e *scrubbed) Unwrap() error { return e.err }
