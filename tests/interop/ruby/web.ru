# Sidekiq's own Web UI (6.4.1) as a bare Rack app, for tests/interop/test_web_ui.py:
#
#   REDIS_URL=redis://... rackup -s webrick -o 127.0.0.1 -p 0 tests/interop/ruby/web.ru
#
# Sidekiq::Web's CSRF protection needs a Rack session; a random secret per run is enough
# for a test server (nothing outlives it).
#
# Sidekiq 8.0 runs on rack 3, whose Rack::Session::Cookie moved to the rack-session gem (not
# unpacked here): a stand-in session serves its GET pages, all the fleet tests fetch.
require "securerandom"
require "rack"
require "sidekiq/web"

if Rack.release >= "3"
  class StandInSession
    def initialize(app)
      @app = app
    end

    def call(env)
      env["rack.session"] ||= {}
      @app.call(env)
    end
  end
  use StandInSession
else
  require "rack/session/cookie"
  use Rack::Session::Cookie, key: "sidekiq.session", secret: SecureRandom.hex(64), same_site: true, max_age: 3600
end
run Sidekiq::Web
