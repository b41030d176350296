# nomad agent -dev -config=nomad-dev.hcl
client {
  host_volume "svc-state-1" {
    path = "/tmp/svc-state/svc-state-1"
  }
  host_volume "svc-state-2" {
    path = "/tmp/svc-state/svc-state-2"
  }
  host_volume "svc-state-3" {
    path = "/tmp/svc-state/svc-state-3"
  }
}

plugin "raw_exec" {
  config {
    enabled = true
  }
}

vault {
  enabled               = true
  address               = "http://127.0.0.1:8200"
  jwt_auth_backend_path = "jwt-nomad"

  default_identity {
    aud = ["vault.io"]
    ttl = "1h"
  }
}
