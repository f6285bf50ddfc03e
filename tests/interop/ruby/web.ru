# Sidekiq's own Web UI (6.4.1) as a bare Rack app, for tests/interop/test_web_ui.py:
#
#   REDIS_URL=redis://... rackup -s webrick -o 127.0.0.1 -p 0 tests/interop/ruby/web.ru
#
# Sidekiq::Web's CSRF protection needs a Rack session; a random secret per run is enough
# for a test server (nothing outlives it).
require "securerandom"
require "rack/session/cookie"
require "sidekiq/web"

use Rack::Session::Cookie, key: "sidekiq.session", secret: SecureRandom.hex(64), same_site: true, max_age: 3600
run Sidekiq::Web
