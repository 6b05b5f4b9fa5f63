package natsutil

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/config"
)

// Config says how a server reaches NATS. The zero value runs an embedded
// nats-server with JetStream in memory and opens no port.
type Config struct {
	// URL of an external NATS server or cluster (comma-separated URLs are
	// tried in turn), for example "nats://10.0.0.5:4222". Empty runs an
	// embedded server in process.
	URL string `yaml:"url"`
	// Listen is the client address of the embedded server, for other
	// processes to join (for example "127.0.0.1:4222"). Empty opens no port:
	// only this process can reach the embedded server.
	Listen string `yaml:"listen"`
	// StoreDir is where the embedded server keeps JetStream files. Empty
	// keeps JetStream in memory only, so history does not survive a restart.
	StoreDir string `yaml:"store_dir"`
	// ServerName names the embedded server; empty lets nats-server pick one.
	ServerName string `yaml:"server_name"`
	// ConnectTimeout bounds starting the embedded server and connecting.
	// Zero means 10s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// Cluster joins the embedded server to other nats-servers by routes.
	Cluster ClusterConfig `yaml:"cluster"`
}

// ClusterConfig joins an embedded server to a NATS cluster. The zero value
// runs a lone server.
type ClusterConfig struct {
	// Name of the cluster; every member uses the same name.
	Name string `yaml:"name"`
	// Listen is the route address of this server ("127.0.0.1:6222"; port 0
	// picks a free port).
	Listen string `yaml:"listen"`
	// Routes are the route URLs of the other members
	// ("nats://127.0.0.1:6223").
	Routes []string `yaml:"routes"`
}

// Validate checks the addresses and URLs.
func (c Config) Validate() error {
	if c.URL != "" {
		for _, u := range strings.Split(c.URL, ",") {
			if _, err := url.Parse(strings.TrimSpace(u)); err != nil {
				return config.Errorf("url", "natsutil: %q: %v", u, err)
			}
		}
		if c.Listen != "" || c.StoreDir != "" || c.Cluster.Name != "" {
			return config.Errorf("url", "natsutil: listen, store_dir and cluster configure the embedded server; they cannot be used with url")
		}
	}
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return config.Errorf("listen", "natsutil: %q: %v", c.Listen, err)
		}
	}
	if c.ConnectTimeout < 0 {
		return config.Errorf("connect_timeout", "natsutil: must not be negative, got %v", c.ConnectTimeout)
	}
	if (c.Cluster.Name == "") != (c.Cluster.Listen == "") {
		return config.Errorf("cluster", "natsutil: needs both name and listen")
	}
	if c.Cluster.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Cluster.Listen); err != nil {
			return config.Errorf("cluster.listen", "natsutil: %q: %v", c.Cluster.Listen, err)
		}
	}
	for i, r := range c.Cluster.Routes {
		if _, err := url.Parse(r); err != nil {
			return config.Errorf(fmt.Sprintf("cluster.routes[%d]", i), "natsutil: %q: %v", r, err)
		}
	}
	return nil
}

func (c Config) timeout() time.Duration {
	if c.ConnectTimeout == 0 {
		return 10 * time.Second
	}
	return c.ConnectTimeout
}
