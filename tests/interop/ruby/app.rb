# Loaded by `sidekiq -r` (the Ruby worker) and by client.rb: job classes shared with the
# Python side. Each job records what it received in the Redis list "ruby:seen" so a test
# can compare it with what Python pushed.
require "json"
require "sidekiq"

module Interop
  def self.record(klass, jid, args, extra = {})
    Sidekiq.redis do |conn|
      conn.rpush("ruby:seen", JSON.generate({"class" => klass, "jid" => jid, "args" => args}.merge(extra)))
    end
  end

  # Runs whatever Python pushes under the wire name "Interop::Echo".
  class Echo
    include Sidekiq::Worker
    sidekiq_options queue: "ruby"

    def perform(*args)
      Interop.record(self.class.name, jid, args)
    end
  end

  # Always fails, so its retry entries can be handed to the Python worker.
  class Fail
    include Sidekiq::Worker
    sidekiq_options queue: "ruby", retry: 3, backtrace: true

    def perform(*args)
      raise ArgumentError, "ruby boom #{args.inspect}"
    end
  end

  class Slow
    include Sidekiq::Worker
    sidekiq_options queue: "ruby"

    def perform(seconds)
      Interop.record(self.class.name, jid, [seconds], "phase" => "start")
      sleep seconds
      Interop.record(self.class.name, jid, [seconds], "phase" => "done")
    end
  end
end

begin
  require "active_job"
  ActiveJob::Base.queue_adapter = :sidekiq
  ActiveJob::Base.logger = Logger.new(nil)

  # The Rails side of the ActiveJob checks: Python enqueues it in Rails' wrapper shape.
  class HelloJob < ActiveJob::Base
    queue_as :mailers

    def perform(*args)
      Interop.record(self.class.name, job_id, args)
    end
  end
rescue LoadError
  # ActiveJob is optional for everything but the ActiveJob checks, which say so.
end

# client.rb reads Sidekiq::RetrySet, DeadSet, ProcessSet, Workers, Stats: load the API.
require "sidekiq/api"

# --- Wire-format checks (tests/interop/test_python_to_ruby.py, test_timestamps.py) ---------
module Interop
  # Like Echo, and also records when it ran, so a scheduled job can be checked against its due time.
  class Stamp
    include Sidekiq::Worker
    sidekiq_options queue: "ruby"

    def perform(*args)
      Interop.record(self.class.name, jid, args, "ran_at" => Time.now.to_f)
    end
  end
end

# SIDEKIQ_POLL=<seconds> pins the scheduled/retry poll interval (the default is a random 5-15 s,
# too slow for tests). It also drops the fixed 10 s boot wait; a random 0-5 s one remains.
Sidekiq.configure_server do |config|
  config.options[:poll_interval_average] = ENV["SIDEKIQ_POLL"].to_f if ENV["SIDEKIQ_POLL"]
end

# --- Keyword arguments (tests/interop/test_keywords.py) ---------------------------------------
# Python sends a job's keyword arguments under the payload key "kwargs". Sidekiq itself ignores
# the key (perform gets the positional args) and keeps it through retries; a Ruby app that wants
# the keywords reads them in a server middleware, as here.
module Interop
  class ReadKeywords
    def call(worker, job, _queue)
      worker.kwargs = job["kwargs"] || {} if worker.respond_to?(:kwargs=)
      yield
    end
  end

  class Keywords
    include Sidekiq::Worker
    sidekiq_options queue: "ruby"
    attr_accessor :kwargs

    def perform(*args)
      Interop.record(self.class.name, jid, args, "kwargs" => kwargs)
    end
  end
end

Sidekiq.configure_server do |config|
  config.server_middleware { |chain| chain.add Interop::ReadKeywords }
end
