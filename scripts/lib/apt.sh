# Sourced by scripts/setup.d/*.sh: install the Debian packages that are missing.
ensure_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # No recommends: they pull in firmware, initramfs-tools and a bootloader, none needed.
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}
