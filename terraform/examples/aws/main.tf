provider "aws" {
  region = var.region

  default_tags {
    tags = {
      "svc:cluster" = var.name
    }
  }
}

data "aws_availability_zones" "available" {
  state = "available"
}

# Ubuntu 24.04 LTS from Canonical's own account.
data "aws_ami" "ubuntu" {
  most_recent = true
  owners      = ["099720109477"]

  filter {
    name   = "name"
    values = ["ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-${var.architecture}-server-*"]
  }
}

locals {
  zones = slice(data.aws_availability_zones.available.names, 0, min(3, length(data.aws_availability_zones.available.names)))

  # One subnet per zone; server i sits in zone i mod 3 at a fixed address,
  # so that every VM's cloud-init can name its peers before any VM exists.
  subnets = [for i, z in local.zones : { zone = z, cidr = cidrsubnet(var.vpc_cidr, 8, i) }]
  servers = [for i in range(var.server_count) : {
    index  = i
    name   = "${var.name}-${i + 1}"
    id     = "svc-${i + 1}"
    subnet = i % length(local.subnets)
    ip     = cidrhost(local.subnets[i % length(local.subnets)].cidr, 10 + floor(i / length(local.subnets)))
  }]
  server_ips = [for s in local.servers : s.ip]
  peers      = [for s in local.servers : "${s.id}=${s.ip}:${var.svc_cluster_port}"]
}

# The private network: the cluster talks over the VPC's addresses only.
resource "aws_vpc" "main" {
  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true

  tags = { Name = var.name }
}

resource "aws_internet_gateway" "main" {
  vpc_id = aws_vpc.main.id

  tags = { Name = var.name }
}

resource "aws_subnet" "main" {
  count                   = length(local.subnets)
  vpc_id                  = aws_vpc.main.id
  availability_zone       = local.subnets[count.index].zone
  cidr_block              = local.subnets[count.index].cidr
  map_public_ip_on_launch = true

  tags = { Name = "${var.name}-${local.subnets[count.index].zone}" }
}

resource "aws_route_table" "main" {
  vpc_id = aws_vpc.main.id

  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.main.id
  }

  tags = { Name = var.name }
}

resource "aws_route_table_association" "main" {
  count          = length(aws_subnet.main)
  subnet_id      = aws_subnet.main[count.index].id
  route_table_id = aws_route_table.main.id
}

# The firewall: svc's API and app ports from api_cidrs; everything else
# only between the cluster's own VMs. No SSH: operators reach a VM with
# AWS Systems Manager (aws ssm start-session), which needs no open port.
resource "aws_security_group" "cluster" {
  name        = var.name
  description = "svc cluster: API from api_cidrs, the stack's ports between members only"
  vpc_id      = aws_vpc.main.id

  tags = { Name = var.name }
}

resource "aws_vpc_security_group_ingress_rule" "api" {
  for_each          = toset(var.api_cidrs)
  security_group_id = aws_security_group.cluster.id
  description       = "svc API and console"
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = var.svc_http_port
  to_port           = var.svc_http_port
}

resource "aws_vpc_security_group_ingress_rule" "apps" {
  for_each          = var.open_app_ports ? toset(var.api_cidrs) : toset([])
  security_group_id = aws_security_group.cluster.id
  description       = "svc's apps (port routing: app.port_start-app.port_end)"
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = 9000
  to_port           = 9019
}

locals {
  # Between members only: port ranges by protocol, what each is for.
  internal_rules = {
    svc_api      = { protocol = "tcp", from = var.svc_http_port, to = var.svc_http_port, what = "svc API (forwarded writes, artifacts for Nomad clients)" }
    svc_raft     = { protocol = "tcp", from = var.svc_cluster_port, to = var.svc_cluster_port, what = "svc Raft (cluster port)" }
    nomad        = { protocol = "tcp", from = 4646, to = 4648, what = "Nomad HTTP, RPC, Serf" }
    nomad_serf   = { protocol = "udp", from = 4648, to = 4648, what = "Nomad Serf" }
    consul       = { protocol = "tcp", from = 8300, to = 8302, what = "Consul server RPC, Serf LAN/WAN" }
    consul_serf  = { protocol = "udp", from = 8301, to = 8302, what = "Consul Serf LAN/WAN" }
    consul_http  = { protocol = "tcp", from = 8500, to = 8500, what = "Consul HTTP" }
    vault        = { protocol = "tcp", from = 8200, to = 8201, what = "Vault API and cluster" }
    nomad_allocs = { protocol = "tcp", from = 20000, to = 32000, what = "Nomad's dynamic ports: the apps' allocations, reached by svc's edge" }
  }
}

resource "aws_vpc_security_group_ingress_rule" "internal" {
  for_each                     = local.internal_rules
  security_group_id            = aws_security_group.cluster.id
  description                  = each.value.what
  referenced_security_group_id = aws_security_group.cluster.id
  ip_protocol                  = each.value.protocol
  from_port                    = each.value.from
  to_port                      = each.value.to
}

# Out: apt, HashiCorp's repository, the svc binary's URL, AWS's APIs.
resource "aws_vpc_security_group_egress_rule" "all" {
  security_group_id = aws_security_group.cluster.id
  description       = "everything out"
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
}

# Vault's auto-unseal key: Vault unseals itself after a restart, and its
# root token and recovery key never leave the first VM.
resource "aws_kms_key" "vault" {
  description             = "${var.name}: Vault auto-unseal"
  deletion_window_in_days = 7
  enable_key_rotation     = true
}

# The VMs' role: Vault's KMS seal, Vault's AWS auth method (each VM logs in
# to Vault with it to read svc's secrets), and Systems Manager.
data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "node" {
  name               = "${var.name}-node"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

data "aws_iam_policy_document" "node" {
  statement {
    sid       = "VaultAutoUnseal"
    actions   = ["kms:Encrypt", "kms:Decrypt", "kms:DescribeKey"]
    resources = [aws_kms_key.vault.arn]
  }
}

resource "aws_iam_role_policy" "node" {
  name   = "vault-unseal"
  role   = aws_iam_role.node.id
  policy = data.aws_iam_policy_document.node.json
}

resource "aws_iam_role_policy_attachment" "ssm" {
  role       = aws_iam_role.node.name
  policy_arn = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "node" {
  name = "${var.name}-node"
  role = aws_iam_role.node.name
}

resource "aws_instance" "server" {
  count                  = var.server_count
  ami                    = data.aws_ami.ubuntu.id
  instance_type          = var.instance_type
  subnet_id              = aws_subnet.main[local.servers[count.index].subnet].id
  private_ip             = local.servers[count.index].ip
  vpc_security_group_ids = [aws_security_group.cluster.id]
  iam_instance_profile   = aws_iam_instance_profile.node.name

  # Nothing secret in here: user_data is in the state and readable by
  # whoever may describe the instance. It runs at the first boot only.
  user_data = templatefile("${path.module}/cloud-init.yaml.tftpl", {
    index             = count.index
    node_id           = local.servers[count.index].id
    private_ip        = local.servers[count.index].ip
    server_ips        = local.server_ips
    peers             = local.peers
    region            = var.region
    kms_key_id        = aws_kms_key.vault.key_id
    node_role_arn     = aws_iam_role.node.arn
    nomad_version     = var.nomad_version
    consul_version    = var.consul_version
    vault_version     = var.vault_version
    svc_url           = var.svc_url
    svc_sha256        = var.svc_sha256
    svc_http_port     = var.svc_http_port
    svc_cluster_port  = var.svc_cluster_port
    hashicorp_key_fpr = var.hashicorp_apt_key_fingerprint
  })

  metadata_options {
    http_tokens = "required"
  }

  root_block_device {
    volume_size = var.disk_gb
    volume_type = "gp3"
    encrypted   = true
  }

  tags = { Name = local.servers[count.index].name }

  # A newer Ubuntu image or a changed template must not replace the
  # cluster's VMs (and their state) at the next apply: upgrade svc in
  # place (docs/upgrade.md), the stack with apt, or replace one VM at a time
  # (tofu apply -replace='aws_instance.server[2]').
  lifecycle {
    ignore_changes = [ami, user_data]
  }

  depends_on = [aws_route_table_association.main, aws_iam_role_policy.node]
}
